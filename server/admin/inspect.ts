import { headOf, toView } from '../../protocol/view.js';
import type { EngineAdmin } from '../engine/admin.js';
import type { Engine, EngineOptions } from '../engine/engine.js';
import { snapshotInterval, toConvState, type StoredConv } from '../engine/rules.js';
import { checkUser, type Finding } from './checks.js';

export interface ConversationLine {
  conv: string;
  /** member; left (a tombstone, or the record of a deleted conversation); pending (a message arrived before the join). */
  status: 'member' | 'left' | 'pending';
  /** The effective lastSeq: for a read-diffused conversation, its head. */
  lastSeq: number;
  storedLastSeq: number;
  readSeq: number;
  unread: number;
  mentions: number;
  muted: boolean;
  markedUnread: boolean;
  /** Deleted by the user and no newer message: not shown, not counted. */
  hidden: boolean;
  deletedSeq: number;
  category: string;
  mode: 'write' | 'read';
  gen: number;
  joinGen: number;
}

export interface UserInspection {
  uid: string;
  /** False: the store holds no stream for this user (never seen, only pending records, or erased). */
  seen: boolean;
  epoch: string;
  version: number;
  /** The epoch rotates at the user's next step (the Redis server holding it restarted since). */
  epochRotates: boolean;
  stream: { base: number; length: number; ttlSeconds: number; interval: number };
  snapshot: { version: number; present: boolean; conversations: number; ttlSeconds: number };
  totals: {
    /** The badge numbers as /unread computes them: stored totals plus read-diffused conversations now. */
    shown: { total: number; mentions: number; categories: Record<string, number> };
    /** What the store keeps for write-diffused conversations (must equal their sum). */
    stored: { total: number; mentions: number; categories: Record<string, number> };
  };
  conversations: ConversationLine[];
  /** The reconcile checks on this user, right now (no grace period: a finding may be a step in flight). */
  findings: Finding[];
}

export interface ConversationInspection {
  conv: string;
  deleting: boolean;
  maxSeq: number;
  memberCount: number;
  storedMemberCount: number;
  mode: 'write' | 'read';
  category: string;
  gen: number;
  /** Generation of an unfinished member rewrite (0: none). */
  rewrite: number;
  members: { uid: string; joinGen: number; joinHead: number }[];
  /** Members left out of `members` (at most `limit` are listed). */
  moreMembers: number;
}

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
    snapshot: { version: meta?.snapshotVersion ?? 0, present: raw.snapshot !== null, conversations: raw.snapshot?.convs.length ?? 0, ttlSeconds: raw.ttl.snapshot },
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
    unread: Math.max(0, lastSeq - rec.readSeq),
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

function plain(t: { total: number; mentions: number; categories: ReadonlyMap<string, number> }): { total: number; mentions: number; categories: Record<string, number> } {
  return { total: t.total, mentions: t.mentions, categories: Object.fromEntries(t.categories) };
}
