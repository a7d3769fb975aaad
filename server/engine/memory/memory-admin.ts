import { setTimeout as sleep } from 'node:timers/promises';
import {
  type ConversationView,
  type DeleteStep,
  type EngineAdmin,
  type RawConversation,
  type RawUser,
  type RebaseStep,
  type ScanPage,
  totalsOfRecords,
} from '../admin.js';
import { UNSEEN_EPOCH } from '../engine.js';
import { type StoredConv, sameRecord, toConvState } from '../rules.js';
import { encodeMemberTag, encodeSnapshotText } from '../state-text.js';
import { clearEntries } from './entry-log.js';
import type { LocalNotifications } from './local-notifications.js';
import {
  entriesAfter,
  info,
  largeMemberConvs,
  type MemoryConversation,
  type MemoryUser,
  memberTag,
  memberTags,
  newEpoch,
  recordOf,
  recordsOf,
  setTotals,
  snapshotOf,
  totalsOf,
} from './memory-state.js';
import { EMPTY_TABLE, type TextTable, tableCopy, tableEntries, tableHas, tableKeys, tableSet, tableSize } from './text-table.js';

/** A deletion begun and not finished: the roster it removes, under its generation. */
interface MemoryDeletion {
  gen: number;
  maxSeq: number;
  /** uid → tag text, as a conversation's members (state-text.ts encodeMemberTag). */
  members: TextTable;
}

/** How long beginDelete waits for the clock to pass a conversation's generations (see RedisAdmin). */
const CLOCK_WAIT_MS = 2_000;

/**
 * The memory engine's EngineAdmin, over the engine's own maps. Every method is synchronous inside
 * one call, so each is trivially one atomic step; the toolbox's multi-step operations interleave
 * between calls exactly as on Redis.
 */
export class MemoryAdmin implements EngineAdmin {
  /** Memory streams are kept as long as the process runs. */
  readonly streamsExpire = false;
  private readonly deletions = new Map<string, MemoryDeletion>();

  constructor(
    private readonly conversations: Map<string, MemoryConversation>,
    private readonly users: Map<string, MemoryUser>,
    private readonly notifications: LocalNotifications,
    /** The engine's join claims (MemoryEngine.claimJoins): a wiped user's go with it. */
    private readonly claims: Map<string, unknown>,
    /** The badge hook's record of a user (its last delivered badge, its presence): a wiped user's go with it. */
    private readonly forgetBadge: (uid: string) => void = () => undefined,
  ) {}

  async scanUsers(cursor: string, count: number): Promise<ScanPage> {
    return page([...this.users.keys()], cursor, count);
  }

  async scanConversations(cursor: string, count: number): Promise<ScanPage> {
    const ids = [...this.conversations.keys(), ...[...this.deletions.keys()].filter((c) => !this.conversations.has(c))];
    return page(ids, cursor, count);
  }

  async readUser(uid: string): Promise<RawUser> {
    const user = this.users.get(uid);
    const records = user ? recordsOf(user) : [];
    if (!user || user.epoch === undefined) {
      return { uid, meta: null, records, largeIndex: [], stream: { length: 0, afterSnapshot: [] }, snapshot: null, ttl: { stream: -2, snapshot: -2 } };
    }
    return {
      uid,
      meta: {
        epoch: user.epoch,
        version: user.version,
        base: user.base,
        snapshotVersion: user.snapshotVersion,
        memberCount: user.memberCount,
        totals: totalsOf(user),
      },
      records,
      // The memory engine keeps no separate index: it is derived from the records when read.
      largeIndex: largeMemberConvs(user),
      stream: { length: user.entryCount, afterSnapshot: entriesAfter(user, user.snapshotVersion) },
      snapshot: snapshotOf(user),
      ttl: { stream: -1, snapshot: -1 },
    };
  }

  async readConversation(conv: string): Promise<RawConversation | null> {
    const c = this.conversations.get(conv);
    if (c) return { info: info(conv, c), rewrite: c.rewrite, storedCount: tableSize(c.members), members: memberTags(c.members), deleting: false };
    const d = this.deletions.get(conv);
    if (!d) return null;
    return {
      info: { conv, maxSeq: d.maxSeq, large: false, category: 'default', memberCount: tableSize(d.members), gen: d.gen },
      rewrite: 0,
      storedCount: tableSize(d.members),
      members: memberTags(d.members),
      deleting: true,
    };
  }

  async conversationViews(uid: string, convs: readonly string[]): Promise<Map<string, ConversationView>> {
    const out = new Map<string, ConversationView>();
    for (const conv of convs) {
      const c = this.conversations.get(conv);
      const tag = c ? memberTag(c.members, uid) : undefined;
      out.set(conv, c ? { exists: true, info: info(conv, c), rewrite: c.rewrite, tag: tag ?? null } : { exists: false, info: null, rewrite: 0, tag: null });
    }
    return out;
  }

  async records(pairs: readonly { uid: string; conv: string }[]): Promise<(StoredConv | null)[]> {
    return pairs.map(({ uid, conv }) => {
      const user = this.users.get(uid);
      return (user && recordOf(user, conv)) ?? null;
    });
  }

  async rebuildUser(uid: string, options: { restream: boolean }): Promise<void> {
    const user = this.users.get(uid);
    if (!user) return;
    const records = recordsOf(user);
    const members = records.filter((r) => r.member);
    if (user.epoch === undefined && members.length === 0) return;
    setTotals(user, totalsOfRecords(records));
    user.memberCount = members.length;
    if (!options.restream && user.epoch !== undefined) return;
    user.epoch = newEpoch();
    user.version += 1;
    user.base = user.version;
    clearEntries(user);
    user.snapshotVersion = user.version;
    user.snapshotText = encodeSnapshotText(members.map(toConvState));
    const first = members[0];
    // Another epoch in a push makes a client pull, and the pull brings this snapshot.
    if (first) this.notifications.user([{ uid, conv: first.conv, epoch: user.epoch, version: user.version, state: toConvState(first) }]);
  }

  async repairConversation(conv: string, minGen: number): Promise<RawConversation | null> {
    const c = this.conversations.get(conv);
    // The member count is the map's size here: only the generation can need raising.
    if (c) c.gen = Math.max(c.gen, minGen);
    return this.readConversation(conv);
  }

  async rebaseConversation(conv: string, seq: number): Promise<RebaseStep | null> {
    const c = this.conversations.get(conv);
    if (!c) return null;
    const before = c.maxSeq;
    const head = Math.min(before, seq);
    // Generations start from the clock (MemoryEngine.changeMembers): newer than every one given.
    const gen = Math.max(c.gen + 1, Date.now());
    const members = memberTags(c.members).map((tag) => ({ uid: tag.uid, joinGen: gen, joinHead: Math.min(tag.joinHead, head) }));
    for (const tag of members) c.members = tableSet(c.members, tag.uid, encodeMemberTag(tag));
    c.maxSeq = head;
    c.gen = gen;
    // Seqs above the new head will be other messages (rules.ts lowerTo): what the conversation
    // kept of them goes (conv_rebase.lua).
    c.nocount = c.nocount.filter((s) => s <= head);
    c.mentionAll = c.mentionAll.filter((s) => s <= head);
    for (const seq of c.mentioned?.keys() ?? []) if (seq > head) c.mentioned?.delete(seq);
    c.largeFrom = Math.min(c.largeFrom, head);
    c.mentionFloor = Math.min(c.mentionFloor, head);
    return { before, head, gen, large: c.large, category: c.category, members };
  }

  async wipeUser(uid: string, expected: readonly StoredConv[]): Promise<boolean> {
    const user = this.users.get(uid);
    if (!user) {
      if (expected.length === 0) {
        this.claims.delete(uid);
        this.forgetBadge(uid);
      }
      return expected.length === 0;
    }
    if (tableSize(user.records) !== expected.length || !expected.every((rec) => sameRecord(recordOf(user, rec.conv), rec))) return false;
    this.users.delete(uid);
    this.claims.delete(uid);
    this.forgetBadge(uid);
    const first = expected[0];
    if (user.epoch !== undefined && first) this.notifications.user([{ uid, conv: first.conv, epoch: UNSEEN_EPOCH, version: 0, state: null }]);
    return true;
  }

  async beginDelete(conv: string): Promise<DeleteStep | null> {
    // A re-created conversation takes its generation from the clock: the deletion's must be below
    // every clock reading from now on, so that the new conversation's membership ops win.
    const deadline = Date.now() + CLOCK_WAIT_MS;
    for (;;) {
      const c = this.conversations.get(conv);
      const d = this.deletions.get(conv);
      if (!c) return d ? step(d) : null;
      const gen = Math.max(c.gen, d?.gen ?? 0) + 1;
      const now = Date.now();
      if (gen >= now && now < deadline) {
        await sleep(gen - now + 1);
        continue;
      }
      const deletion: MemoryDeletion = d ?? { gen, maxSeq: 0, members: EMPTY_TABLE };
      if (d) for (const [uid, tag] of tableEntries(c.members)) deletion.members = tableSet(deletion.members, uid, tag);
      else deletion.members = tableCopy(c.members);
      deletion.gen = Math.max(gen, now - 1);
      deletion.maxSeq = Math.max(deletion.maxSeq, c.maxSeq);
      this.deletions.set(conv, deletion);
      this.conversations.delete(conv);
      return step(deletion);
    }
  }

  async finishDelete(conv: string, gen: number): Promise<void> {
    if (this.deletions.get(conv)?.gen === gen) this.deletions.delete(conv);
  }

  async convsListing(uid: string, convs: readonly string[]): Promise<string[]> {
    return convs.filter((conv) => {
      const c = this.conversations.get(conv);
      return c !== undefined && tableHas(c.members, uid);
    });
  }
}

function step(d: MemoryDeletion): DeleteStep {
  return { gen: d.gen, maxSeq: d.maxSeq, members: tableKeys(d.members) };
}

/**
 * A page of `ids` after the cursor (the last id of the previous page, so that removals during a
 * walk skip nothing: an id removed meanwhile restarts the walk from the start, which only repeats).
 */
function page(ids: readonly string[], cursor: string, count: number): ScanPage {
  const start = cursor === '' ? 0 : ids.indexOf(cursor) + 1;
  const slice = ids.slice(start, start + Math.max(1, count));
  const done = start + slice.length >= ids.length;
  return { cursor: done ? '' : (slice.at(-1) ?? ''), ids: slice };
}
