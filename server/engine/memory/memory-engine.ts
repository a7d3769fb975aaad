import { topicConv } from '../../../protocol/child-id.js';
import { LIMITS } from '../../../protocol/limits.js';
import type { Cursor } from '../../../protocol/types.js';
import type { EngineAdmin } from '../admin.js';
import type { BadgeMarks } from '../badge-marks.js';
import {
  type ApplyOptions,
  type ClaimTerms,
  type ConvInfo,
  type Engine,
  type EngineOptions,
  type HeadExtra,
  type JoinClaim,
  type MembersChange,
  type MembersStep,
  type MemberTag,
  type MessageRecord,
  type RecordedMessage,
  type Roster,
  type StoredPull,
  type StoredUserState,
  type TopicAdd,
  UNSEEN_EPOCH,
  type UserOp,
  type UserOpResult,
} from '../engine.js';
import type { UserChange } from '../notifications.js';
import {
  applyRule,
  claimLive,
  claimOutcome,
  contribution,
  headPushExtras,
  mergeMentions,
  mergeNocount,
  needsReset,
  type StoredConv,
  sameRecord,
  sameState,
  snapshotInterval,
  toConvState,
  trimmedBase,
  visibleState,
} from '../rules.js';
import { encodeEntryText, encodeMemberTag, encodeSnapshotText } from '../state-text.js';
import { appendEntry, trimEntries } from './entry-log.js';
import { LocalNotifications } from './local-notifications.js';
import { MemoryAdmin } from './memory-admin.js';
import { MemoryBadgeMarks } from './memory-badge-marks.js';
import { MemoryReadPositions } from './memory-read-positions.js';
import {
  addToCategory,
  entriesAfter,
  info,
  largeMemberConvs,
  MemoryConversation,
  MemoryUser,
  memberRecords,
  membersWithin,
  memberTag,
  memberTags,
  NO_SEQS,
  newEpoch,
  putRecord,
  recordOf,
  snapshotOf,
  totalsOf,
} from './memory-state.js';
import { tableDelete, tableHas, tableKeys, tableSet, tableSize } from './text-table.js';

/**
 * The in-process engine: the default when no Redis is configured. Everything is synchronous
 * inside one call, which makes every method trivially atomic; the multi-step protocols on top
 * (membership, ingest) still interleave between calls exactly as on Redis. A restart loses all
 * state, and a new epoch per user tells clients their cursors no longer apply.
 */
export class MemoryEngine implements Engine {
  readonly kind = 'memory' as const;
  readonly notifications = new LocalNotifications();
  private readonly conversations = new Map<string, MemoryConversation>();
  private readonly users = new Map<string, MemoryUser>();
  /** uid → conv → deadline (ms) and the record's generation then: the conversation cap's joins claimed and not yet landed (claimJoins). */
  private readonly claims = new Map<string, Map<string, { deadline: number; gen: number }>>();
  /** conv → topic → whether its child is complete (Engine.addTopic). Kept beside the conversations: most have no topics. */
  private readonly topicRegistry = new Map<string, Map<string, boolean>>();
  /** conv → the roots of its threads (Engine.addThread). */
  private readonly threadRegistry = new Map<string, Set<number>>();
  /** A topic's conversation → the parent generation of the newest roster synced into it (MembersChange.sync; '#P' on Redis). */
  private readonly syncedFrom = new Map<string, number>();
  private closed = false;
  /** The badge hook's marks: written only when EngineOptions.badgeMarks is on. */
  private readonly marks = new MemoryBadgeMarks();

  private toolbox: MemoryAdmin | undefined;
  readonly readPositions = new MemoryReadPositions(this.conversations, this.notifications);

  constructor(private readonly options: EngineOptions) {}

  badgeMarks(): BadgeMarks {
    return this.marks;
  }

  /** The operator's view of this store (server/engine/admin.ts): one per engine, sharing its state. */
  admin(): EngineAdmin {
    this.toolbox ??= new MemoryAdmin(this.conversations, this.users, this.notifications, this.claims, (uid) => this.marks.forget(uid));
    return this.toolbox;
  }

  async changeMembers(conv: string, change: MembersChange): Promise<MembersStep> {
    let c = this.conversations.get(conv);
    const sync = change.sync;
    const held = this.syncedFrom.get(conv) ?? 0;
    const fromGen = c?.gen ?? 0;
    if (c && sync !== undefined && sync < held) {
      // A stale sync (conv_members.lua): a newer roster is in.
      const members = c.members;
      return {
        info: info(conv, c),
        joins: [],
        leaves: [...new Set(change.remove)].filter((uid) => !tableHas(members, uid)),
        rewrite: c.rewrite !== 0,
        fromGen,
      };
    }
    const delta = sync !== undefined ? change.syncFrom : undefined;
    if (delta !== undefined && (!c || (held !== delta && held !== sync))) {
      // A delta sync the conversation is not ready for (conv_members.lua): nothing changes.
      const now = c ?? new MemoryConversation('default');
      return { info: info(conv, now), joins: [], leaves: [], rewrite: now.rewrite !== 0, fromGen, behind: true };
    }
    let changed = false;
    if (!c) {
      c = new MemoryConversation(change.category ?? 'default');
      this.conversations.set(conv, c);
      changed = true;
    }
    const categoryChanged = change.category !== undefined && change.category !== c.category;
    if (categoryChanged && change.category !== undefined) c.category = change.category;
    const gen = Math.max(c.gen + 1, Date.now());
    const joins: MemberTag[] = [];
    for (const uid of new Set(change.add)) {
      let tag = memberTag(c.members, uid);
      if (!tag) {
        tag = { uid, joinGen: gen, joinHead: c.maxSeq };
        c.members = tableSet(c.members, uid, encodeMemberTag(tag));
        changed = true;
      }
      joins.push(tag);
    }
    const leaves = [...new Set(change.remove)];
    if (sync !== undefined && delta === undefined) {
      const roster = new Set(change.add);
      for (const uid of tableKeys(c.members)) if (!roster.has(uid) && !leaves.includes(uid)) leaves.push(uid);
    }
    if (sync !== undefined) this.syncedFrom.set(conv, sync);
    for (const uid of leaves) {
      if (!tableHas(c.members, uid)) continue;
      c.members = tableDelete(c.members, uid);
      changed = true;
    }
    const large = tableSize(c.members) > change.threshold;
    const modeChanged = large !== c.large;
    c.large = large;
    if (changed || categoryChanged || modeChanged) c.gen = gen;
    if (categoryChanged || modeChanged) c.rewrite = gen;
    // Issue 43: the @all seqs counted while read-diffused stop counting with write diffusion
    // (PROTOCOL.md State rules), and must not count again after a later switch back.
    if (modeChanged && !large) c.mentionAll = NO_SEQS;
    if (modeChanged && large) {
      c.largeFrom = c.maxSeq;
      c.mentionFloor = Math.max(c.mentionFloor, c.maxSeq);
    }
    const ahead = c.nocount.length > 0 && (c.nocount.at(-1) ?? 0) > c.maxSeq;
    return { info: info(conv, c), joins, leaves, rewrite: c.rewrite !== 0, fromGen, ...(ahead ? { nocount: [...c.nocount] } : {}) };
  }

  async roster(conv: string): Promise<Roster | null> {
    const c = this.conversations.get(conv);
    if (!c) return null;
    return { info: info(conv, c), members: memberTags(c.members) };
  }

  async joinTag(conv: string, uid: string): Promise<MemberTag | null> {
    const c = this.conversations.get(conv);
    return (c && memberTag(c.members, uid)) ?? null;
  }

  async finishRewrite(conv: string, gen: number): Promise<void> {
    const c = this.conversations.get(conv);
    if (c && c.rewrite !== 0 && c.rewrite <= gen) c.rewrite = 0;
  }

  async getConversation(conv: string): Promise<ConvInfo | null> {
    const c = this.conversations.get(conv);
    return c ? info(conv, c) : null;
  }

  async addTopic(conv: string, topic: string, cap: number): Promise<TopicAdd> {
    if (!this.conversations.has(conv)) return 'unknown';
    let topics = this.topicRegistry.get(conv);
    const ready = topics?.get(topic);
    if (ready !== undefined) return ready ? 'ready' : 'present';
    if ((topics?.size ?? 0) >= cap) return 'full';
    if (!topics) this.topicRegistry.set(conv, (topics = new Map()));
    topics.set(topic, false);
    return 'added';
  }

  async topicReady(conv: string, topic: string): Promise<void> {
    const topics = this.topicRegistry.get(conv);
    if (topics?.has(topic)) topics.set(topic, true);
  }

  async topics(conv: string): Promise<string[]> {
    return [...(this.topicRegistry.get(conv)?.keys() ?? [])];
  }

  async addThread(conv: string, root: number): Promise<boolean> {
    if (!this.conversations.has(conv)) return false;
    let roots = this.threadRegistry.get(conv);
    if (!roots) this.threadRegistry.set(conv, (roots = new Set()));
    roots.add(root);
    return true;
  }

  async threads(conv: string): Promise<number[]> {
    return [...(this.threadRegistry.get(conv) ?? [])];
  }

  async dropThreads(conv: string): Promise<void> {
    this.threadRegistry.delete(conv);
  }

  async dropTopics(conv: string): Promise<void> {
    const topics = this.topicRegistry.get(conv);
    for (const topic of topics?.keys() ?? []) this.syncedFrom.delete(topicConv(conv, topic));
    this.topicRegistry.delete(conv);
  }

  async missingConversations(convs: readonly string[]): Promise<string[]> {
    return convs.filter((conv) => !this.conversations.has(conv));
  }

  async recordMessages(items: readonly MessageRecord[], at?: number): Promise<(RecordedMessage | null)[]> {
    return items.map((item) => this.recordMessage(item, at));
  }

  private recordMessage(item: MessageRecord, at: number | undefined): RecordedMessage | null {
    const { conv, seq, candidates, at: lastAt, mentionAll, nocount } = item;
    const c = this.conversations.get(conv);
    if (!c) return null;
    const raised = seq > c.maxSeq;
    if (raised) c.maxSeq = seq;
    if (lastAt !== undefined && lastAt > c.lastAt) c.lastAt = lastAt;
    // The seqs recalled for the first time: a read-diffused conversation finds their mentions.
    let fresh: number[] | undefined;
    if (nocount !== undefined && nocount.length > 0) {
      const kept = new Set(c.nocount);
      fresh = nocount.filter((s) => !kept.has(s));
      c.nocount = mergeNocount(c.nocount, nocount);
    }
    if (!c.large) return { info: info(conv, c), members: tableKeys(c.members) };
    if (raised && this.options.badgeMarks) this.marks.markConversation(conv, Date.now());
    if (mentionAll !== undefined && mentionAll.length > 0) c.mentionAll = mergeMentions(c.mentionAll, mentionAll, c.largeFrom);
    const pushed = headPushExtras(item, c.largeFrom);
    if (raised || pushed) this.notifications.head({ conv, maxSeq: c.maxSeq, ...(at !== undefined ? { at } : {}), ...pushed });
    const { held, ahead } = recalledMentions(c, item, fresh ?? []);
    return {
      info: info(conv, c),
      members: candidates.filter((uid) => tableHas(c.members, uid)),
      ...(held ? { drops: held } : {}),
      ...(ahead ? { ahead } : {}),
    };
  }

  async heads(convs: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const conv of convs) {
      const c = this.conversations.get(conv);
      if (c) out.set(conv, c.maxSeq);
    }
    return out;
  }

  async headExtras(convs: readonly string[]): Promise<Map<string, HeadExtra>> {
    const out = new Map<string, HeadExtra>();
    for (const conv of convs) {
      const c = this.conversations.get(conv);
      if (c && (c.lastAt > 0 || c.mentionAll.length > 0 || c.nocount.length > 0))
        out.set(conv, { at: c.lastAt, mentionAll: [...c.mentionAll], nocount: [...c.nocount] });
    }
    return out;
  }

  async applyUserOps(ops: readonly UserOp[], options: ApplyOptions = {}): Promise<UserOpResult[]> {
    const results: UserOpResult[] = [];
    const changes = new Map<string, UserChange[]>();
    for (const op of ops) {
      const result = this.applyUserOp(op);
      results.push(result);
      if (!result.changed) continue;
      let list = changes.get(op.uid);
      if (!list) changes.set(op.uid, (list = []));
      list.push({
        uid: op.uid,
        conv: op.conv,
        epoch: result.epoch,
        version: result.version,
        state: result.state,
        ...(options.at !== undefined ? { at: options.at } : {}),
      });
    }
    for (const list of changes.values()) this.notifications.user(list);
    if (this.options.badgeMarks) {
      const now = Date.now();
      for (const uid of changes.keys()) this.marks.markUser(uid, now);
    }
    if (options.results === false) return [];
    // One user's ops are one step: each result names the user's epoch after the step (a user's
    // first visible change gives it one), as the Redis engine's single reply per user does.
    ops.forEach((op, i) => {
      const r = results[i];
      if (r) r.epoch = this.users.get(op.uid)?.epoch ?? UNSEEN_EPOCH;
    });
    return results;
  }

  async pull(uid: string, since: Cursor | null, limit: number): Promise<StoredPull> {
    const user = this.users.get(uid);
    const mutedMentions = this.readPositions.mutedMentionsNow(uid);
    if (user?.epoch === undefined)
      return { epoch: UNSEEN_EPOCH, snapshot: { v: 0, convs: [] }, entries: [], version: 0, more: false, largeConvs: [], mutedMentions };
    const largeConvs = largeMemberConvs(user);
    const position = {
      epoch: user.epoch,
      version: user.version,
      base: user.base,
      snapshotVersion: user.snapshotVersion,
      interval: this.interval(user),
    };
    const reset = needsReset(position, since);
    const from = reset ? user.snapshotVersion : (since?.version ?? 0);
    const entries = entriesAfter(user, from, Math.max(0, limit));
    const version = entries.at(-1)?.v ?? from;
    return { epoch: user.epoch, ...(reset ? { snapshot: snapshotOf(user) } : {}), entries, version, more: version < user.version, largeConvs, mutedMentions };
  }

  async position(uid: string): Promise<Cursor> {
    const user = this.users.get(uid);
    return { epoch: user?.epoch ?? UNSEEN_EPOCH, version: user?.version ?? 0 };
  }

  async claimJoins(conv: string, uids: readonly string[], terms: ClaimTerms): Promise<JoinClaim[]> {
    const now = Date.now();
    return uids.map((uid) => {
      const user = this.users.get(uid);
      const genOf = (c: string): number => (user ? (recordOf(user, c)?.gen ?? 0) : 0);
      const claims = this.claims.get(uid) ?? new Map<string, { deadline: number; gen: number }>();
      const within = terms.within;
      const counted = (c: string): boolean => within === undefined || c.startsWith(within);
      let others = 0;
      for (const [c, claim] of claims) {
        if (!claimLive(claim, genOf(c), now)) claims.delete(c);
        else if (c !== conv && counted(c)) others++;
      }
      const members = within === undefined ? (user?.memberCount ?? 0) : user ? membersWithin(user, within) : 0;
      const held = members + others;
      const member = user ? recordOf(user, conv)?.member === true : false;
      const outcome = claimOutcome(member, claims.has(conv), held, terms.cap);
      if (outcome === 'claimed') claims.set(conv, { deadline: now + terms.holdMs, gen: genOf(conv) });
      if (claims.size > 0) this.claims.set(uid, claims);
      else this.claims.delete(uid);
      return { uid, outcome, held };
    });
  }

  async userState(uid: string): Promise<StoredUserState> {
    const user = this.users.get(uid);
    const mutedMentions = this.readPositions.mutedMentionsNow(uid);
    if (user?.epoch === undefined)
      return { epoch: UNSEEN_EPOCH, version: 0, states: [], totals: { total: 0, mentions: 0, categories: new Map() }, mutedMentions };
    const states = memberRecords(user).map(toConvState);
    return { epoch: user.epoch, version: user.version, states, totals: totalsOf(user), mutedMentions };
  }

  async ready(): Promise<boolean> {
    return !this.closed;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private applyUserOp(op: UserOp): UserOpResult {
    const existing = this.users.get(op.uid);
    const before = existing ? recordOf(existing, op.conv) : undefined;
    const after = applyRule(before, op);
    const shownBefore = visibleState(before);
    const shown = visibleState(after);
    const changed = !sameState(shownBefore, shown);
    if (!after || sameRecord(before, after)) {
      return { changed: false, member: shown !== null, epoch: existing?.epoch ?? UNSEEN_EPOCH, version: existing?.version ?? 0, state: shown };
    }
    // A write that clients do not see (a pending record, a newer generation) keeps the record
    // silently; only a visible change moves the version (and gives a new user its epoch).
    const user = existing ?? this.createUser(op.uid);
    putRecord(user, after);
    if (!changed) return { changed: false, member: shown !== null, epoch: user.epoch ?? UNSEEN_EPOCH, version: user.version, state: shown };
    user.epoch ??= newEpoch();
    this.adjustTotals(user, before, -1);
    this.adjustTotals(user, after, +1);
    user.memberCount += (after.member ? 1 : 0) - (before?.member ? 1 : 0);
    user.version += 1;
    appendEntry(user, encodeEntryText(op.conv, shown));
    const interval = this.interval(user);
    if (user.version - user.snapshotVersion >= interval) {
      user.snapshotVersion = user.version;
      user.snapshotText = encodeSnapshotText(memberRecords(user).map(toConvState));
    }
    const base = trimmedBase(user.base, user.version, user.snapshotVersion, interval);
    if (base > user.base) {
      trimEntries(user, base - user.base);
      user.base = base;
    }
    return { changed: true, member: shown !== null, epoch: user.epoch, version: user.version, state: shown };
  }

  private interval(user: MemoryUser): number {
    return snapshotInterval(this.options.snapshotEvery, this.options.streamMaxLen, user.memberCount);
  }

  private adjustTotals(user: MemoryUser, rec: StoredConv | undefined, sign: 1 | -1): void {
    const c = contribution(rec);
    if (c.unread === 0 && c.mentions === 0) return;
    // `0 - n`, not `-1 * n`: -1 * 0 is -0, a double, and one double stored in a field makes V8
    // keep that field of every user as a separate boxed number.
    const unread = sign > 0 ? c.unread : 0 - c.unread;
    const mentions = sign > 0 ? c.mentions : 0 - c.mentions;
    user.total += unread;
    user.mentions += mentions;
    addToCategory(user, c.category, unread);
  }

  private createUser(uid: string): MemoryUser {
    const user = new MemoryUser();
    this.users.set(uid, user);
    return user;
  }
}

/**
 * A read-diffused conversation's mention index (conv_record.lua's twin): this batch's mentions of
 * seqs recalled already are not indexed (`ahead`: left out of the ops), the others are (the newest
 * `LIMITS.nocountSeqsPerConversation` pairs); the indexed mentions of seqs recalled now leave the
 * index (`held`: the members' records drop them). A seq recalled for the first time (`fresh`) at or
 * below the index's floor may be mentioned in records the index never saw: every member is held
 * for it (one op each: rare, a recall of an old message). Members only; undefined when none.
 */
function recalledMentions(
  c: MemoryConversation,
  item: MessageRecord,
  fresh: readonly number[],
): { held?: Map<string, number[]>; ahead?: Map<string, number[]> } {
  const out: { held?: Map<string, number[]>; ahead?: Map<string, number[]> } = {};
  const add = (which: 'held' | 'ahead', uid: string, seq: number) => {
    if (!tableHas(c.members, uid)) return;
    const lists = (out[which] ??= new Map());
    const seqs = lists.get(uid);
    if (seqs) {
      if (!seqs.includes(seq)) seqs.push(seq);
    } else lists.set(uid, [seq]);
  };
  if (item.mentioned !== undefined && item.mentioned.length > 0) {
    const gone = new Set(c.nocount);
    for (const [uid, seq] of item.mentioned) {
      if (gone.has(seq)) add('ahead', uid, seq);
      else if (tableHas(c.members, uid)) {
        c.mentioned ??= new Map();
        const uids = c.mentioned.get(seq);
        if (uids) uids.add(uid);
        else c.mentioned.set(seq, new Set([uid]));
      }
    }
    if (c.mentioned !== undefined) c.mentionFloor = Math.max(c.mentionFloor, trimIndex(c.mentioned));
  }
  if (item.nocount !== undefined && c.mentioned !== undefined) {
    for (const seq of item.nocount) {
      const uids = c.mentioned.get(seq);
      if (!uids) continue;
      c.mentioned.delete(seq);
      for (const uid of uids) add('held', uid, seq);
    }
  }
  const swept = fresh.filter((seq) => seq <= c.mentionFloor);
  if (swept.length > 0) for (const uid of tableKeys(c.members)) for (const seq of swept) add('held', uid, seq);
  return out;
}

/**
 * Keeps the newest `LIMITS.nocountSeqsPerConversation` (seq, uid) pairs (lowest seq, then lowest
 * uid, go first, as a Redis sorted set ranks them). Returns the highest seq a pair of it left with (0: none).
 */
function trimIndex(index: Map<number, Set<string>>): number {
  let pairs = 0;
  for (const uids of index.values()) pairs += uids.size;
  let excess = pairs - LIMITS.nocountSeqsPerConversation;
  let forgotten = 0;
  if (excess <= 0) return forgotten;
  for (const seq of [...index.keys()].sort((a, b) => a - b)) {
    const uids = index.get(seq) as Set<string>;
    const sorted = [...uids].sort();
    for (const uid of sorted) {
      if (excess === 0) return forgotten;
      uids.delete(uid);
      forgotten = seq;
      excess--;
    }
    if (uids.size === 0) index.delete(seq);
  }
  return forgotten;
}
