import type { ConversationInspection, ConversationLine, UserInspection } from '../../protocol/admin-replies.js';
import { headOf, toView } from '../../protocol/view.js';
import type { EngineAdmin } from '../engine/admin.js';
import type { Engine, EngineOptions } from '../engine/engine.js';
import { type StoredConv, snapshotInterval, toConvState } from '../engine/rules.js';
import { checkUser } from './checks.js';

export type { ConversationInspection, UserInspection };

/** Everything support needs about one user, in one read of its state (plus its conversations' heads). */
export async function inspectUser(engine: Engine, admin: EngineAdmin, options: EngineOptions, uid: string): Promise<UserInspection> {
  const raw = await admin.readUser(uid);
  const convs = raw.records.map((r) => r.conv);
  const [views, heads] = await Promise.all([admin.conversationViews(uid, convs), engine.heads(raw.records.filter((r) => r.large).map((r) => r.conv))]);
  const headsObject = Object.fromEntries(heads);
  const lines = raw.records.map((rec) => line(rec, headsObject)).sort((a, b) => (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0));
  const shown = { total: 0, mentions: 0, categories: new Map<string, number>() };
  for (const l of lines) {
    if (l.status !== 'member' || l.hidden || l.muted) continue;
    shown.total += l.unread;
    shown.mentions += l.mentions;
    if (l.unread > 0) shown.categories.set(l.category, (shown.categories.get(l.category) ?? 0) + l.unread);
  }
  const meta = raw.meta;
  const stored = meta?.totals ?? { total: 0, mentions: 0, categories: new Map<string, number>() };
  return {
    uid,
    seen: meta !== null,
    epoch: meta?.epoch ?? '0',
    version: meta?.version ?? 0,
    epochRotates: meta?.runId !== undefined && meta.currentRunId !== undefined && meta.runId !== meta.currentRunId,
    stream: {
      base: meta?.base ?? 0,
      length: raw.stream.length,
      ttlSeconds: raw.ttl.stream,
      interval: snapshotInterval(options.snapshotEvery, options.streamMaxLen, meta?.memberCount ?? 0),
    },
    snapshot: {
      version: meta?.snapshotVersion ?? 0,
      present: raw.snapshot !== null,
      conversations: raw.snapshot?.convs.length ?? 0,
      ttlSeconds: raw.ttl.snapshot,
    },
    totals: { shown: plain(shown), stored: plain(stored) },
    conversations: lines,
    findings: checkUser(raw, views, { streamsExpire: admin.streamsExpire }),
  };
}

export async function inspectConversation(admin: EngineAdmin, conv: string, limit = 100): Promise<ConversationInspection | null> {
  const raw = await admin.readConversation(conv);
  if (!raw) return null;
  const members = [...raw.members].sort((a, b) => (a.uid < b.uid ? -1 : 1));
  return {
    conv,
    deleting: raw.deleting,
    maxSeq: raw.info.maxSeq,
    memberCount: raw.members.length,
    storedMemberCount: raw.storedCount,
    mode: raw.info.large ? 'read' : 'write',
    category: raw.info.category,
    gen: raw.info.gen,
    rewrite: raw.rewrite,
    members: members.slice(0, limit).map(({ uid, joinGen, joinHead }) => ({ uid, joinGen, joinHead })),
    moreMembers: Math.max(0, members.length - limit),
  };
}

function line(rec: StoredConv, heads: Record<string, number>): ConversationLine {
  const state = toConvState(rec);
  const view = toView(state, heads);
  const lastSeq = view?.lastSeq ?? (rec.large ? Math.max(rec.lastSeq, headOf(heads, rec.conv)) : rec.lastSeq);
  return {
    conv: rec.conv,
    status: rec.member ? 'member' : rec.gen === 0 ? 'pending' : 'left',
    lastSeq,
    storedLastSeq: rec.lastSeq,
    readSeq: rec.readSeq,
    // Issue 43: less the non-counting seqs above readSeq (PROTOCOL.md "What counts").
    unread: Math.max(0, lastSeq - rec.readSeq - (state.nocount ?? 0)),
    mentions: rec.mentionSeqs.length,
    muted: rec.muted,
    markedUnread: rec.markedUnread,
    hidden: view === null,
    deletedSeq: rec.deletedSeq,
    category: rec.category,
    mode: rec.large ? 'read' : 'write',
    gen: rec.gen,
    joinGen: rec.joinGen,
  };
}

function plain(t: { total: number; mentions: number; categories: ReadonlyMap<string, number> }): {
  total: number;
  mentions: number;
  categories: Record<string, number>;
} {
  return { total: t.total, mentions: t.mentions, categories: Object.fromEntries(t.categories) };
}
