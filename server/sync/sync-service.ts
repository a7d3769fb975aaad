import { isThreadConv, threadConv, topicConv } from '../../protocol/child-id.js';
import { RedpointError } from '../../protocol/errors.js';
import { LIMITS } from '../../protocol/limits.js';
import type { Cursor, MessageEvent, NotificationLevel, PullReply, UnreadSummary } from '../../protocol/types.js';
import { addToTotals, conversationViews, type HeadExtras, type Totals, toView } from '../../protocol/view.js';
import { adminOf } from '../engine/admin.js';
import type { Engine, StoredUserState, UserOp, UserOpResult } from '../engine/engine.js';
import { afterPartOfIt } from '../engine/store-errors.js';
import type { ConversationCap } from './conversation-cap.js';
import { refusal, refusals, unknownConversation } from './conversation-errors.js';
import { Ingest } from './ingest.js';
import { changeMembership, type MembershipChange, type MembershipResult } from './membership.js';
import type { AskedRead, ReadCap } from './read-cap.js';
import { DEFAULT_RECEIPTS_OPTIONS, Receipts, type ReceiptsOptions } from './receipts.js';
import { categoryToThreads, followOrRefuse, leaveThreads, openThreads, type ThreadOptions, toThreadConvs, unfollow } from './threads.js';
import { inheritMembership, openTopics, toTopicConvs } from './topics.js';

export interface BatchResult {
  epoch: string;
  version: number;
  /** The reads not applied, each with why: the conversation does not exist, or the user is not in it. */
  rejected: Array<{ conv: string; code: 'unknown_conversation' | 'not_a_member' }>;
}

export interface SettingsChange {
  muted?: boolean;
  /** The notification level (issue 43); with `muted` too, the two must agree (muted === (level === 'none')). */
  level?: NotificationLevel;
  markedUnread?: boolean;
  /** Hide the conversation up to its current head (applied first, in the same change). */
  deleted?: boolean;
}

/** Enough to overlap the two round trips of a flush with others; more only adds contention. */
const DEFAULT_FLUSHES_IN_FLIGHT = 4;

export interface SyncOptions {
  largeGroupThreshold: number;
  /** Message flushes allowed in flight at once (group commit merges the rest). */
  maxFlushesInFlight?: number;
  /** MAX_READ_AHEAD: reads far above the head are capped before they are applied (absent: none). */
  readCap?: ReadCap;
  /** MAX_CONVERSATIONS_PER_USER: membership calls that would exceed it are refused (absent: no cap). */
  conversationCap?: ConversationCap;
  /** Read receipts' tuning (absent: the defaults). */
  receipts?: ReceiptsOptions;
  /**
   * RECEIPTS_ON_SEND: a sender's own message raises their read position in the receipts too (it
   * raised their readSeq): one step per conversation and sender after each ingest batch. Off: no
   * cost on the message path; the sender's position follows their next read.
   */
  receiptsOnSend?: boolean;
  /** The badge hook is on (EngineOptions.badgeMarks): a change of `mutedMentions` marks the user. */
  badgeMarks?: boolean;
  /** Threads a user may follow per conversation (absent: LIMITS.threadsFollowedPerConversation; tests give a smaller one). */
  threadFollowCap?: number;
}

/**
 * The use cases of Redpoint on top of an Engine: ingest, membership, per-user changes, pull and
 * the unread summary. Holds no state that orders anything: several processes run this over one
 * store as equals (DESIGN.md §9). Pushes come from the engine's notifications, not from here.
 */
export class SyncService {
  readonly ingest: Ingest;
  /** Read receipts: others' read positions (receipts.ts). */
  readonly receipts: Receipts;
  /** Store latency of the calls behind pulls and unread summaries (ingest reports through `ingest.onFlush`). */
  onStoreCall: ((op: 'pull' | 'user_state' | 'read', seconds: number) => void) | undefined;
  /** An implicit thread follow dropped at LIMITS.threadsFollowedPerConversation (threads.ts). */
  onFollowDropped: ((conv: string, uid: string) => void) | undefined;

  constructor(
    readonly engine: Engine,
    private readonly options: SyncOptions,
  ) {
    this.ingest = new Ingest(engine, options.maxFlushesInFlight ?? DEFAULT_FLUSHES_IN_FLIGHT);
    this.receipts = new Receipts(engine, options.receipts ?? DEFAULT_RECEIPTS_OPTIONS);
  }

  /** Applies messages; resolves once they are in the store. Unknown conversations → nothing applied. */
  async postMessages(messages: readonly MessageEvent[]): Promise<void> {
    // Threads: a reply goes to its thread's child conversation, opened and followed first (threads.ts).
    const replies = toThreadConvs(messages);
    if (replies !== messages) await openThreads(this.engine, this.threadOptions(), messages);
    // Topics: a message naming one goes to its child conversation, opened first (topics.ts).
    const routed = toTopicConvs(replies);
    if (routed !== messages) await openTopics(this.engine, this.options.largeGroupThreshold, routed);
    await this.ingest.submit(routed);
    if (this.options.receiptsOnSend) await this.senderReads(routed);
  }

  /** Each sender's own newest message per conversation raises their read receipt (the raise skips non-members). */
  private async senderReads(messages: readonly MessageEvent[]): Promise<void> {
    const bySender = new Map<string, Map<string, number>>();
    for (const m of messages) {
      let convs = bySender.get(m.sender);
      if (!convs) bySender.set(m.sender, (convs = new Map()));
      convs.set(m.conv, Math.max(m.seq, convs.get(m.conv) ?? 0));
    }
    await Promise.all(
      [...bySender].map(([uid, convs]) =>
        this.receipts.raise(
          uid,
          [...convs].map(([conv, seq]) => ({ conv, seq })),
        ),
      ),
    );
  }

  async changeMembers(conv: string, change: MembershipChange): Promise<MembershipResult> {
    const removing = new Set(change.remove);
    const overlap = [...new Set(change.add)].filter((uid) => removing.has(uid));
    if (overlap.length > 0) throw new RedpointError('invalid_request', `both added and removed: ${overlap.join(', ')}`);
    const cap = this.options.conversationCap;
    if (!cap || change.add.length === 0) return this.leftAfter(conv, change, changeMembership(this.engine, this.options.largeGroupThreshold, conv, change));
    // Each new join is claimed on its user first, atomically with the user's count: a user at
    // the cap is left out of the change, never added and withdrawn (ConversationCap).
    const { admitted, full } = await cap.claim(conv, change.add);
    if (full.length === 0) return this.leftAfter(conv, change, changeMembership(this.engine, this.options.largeGroupThreshold, conv, change));
    if (admitted.length === 0 && change.remove.length === 0 && change.category === undefined) throw cap.refusal(full, 'nothing was applied');
    const applied = { ...change, add: admitted };
    const result = await changeMembership(this.engine, this.options.largeGroupThreshold, conv, applied);
    await this.afterChange(conv, applied, result);
    throw cap.refusal(full, 'the rest of the change was applied');
  }

  /** A membership change landed: the positions of those it removed go (a separate step; a crash before it leaves one, counted until they rejoin or the next leave). */
  private async leftAfter(conv: string, change: MembershipChange, done: Promise<MembershipResult>): Promise<MembershipResult> {
    const result = await done;
    await this.afterChange(conv, change, result);
    return result;
  }

  /**
   * After the parent's step and user steps: its topics follow it (topics.ts), those it removed
   * leave its threads and a new category reaches them (threads.ts), then the removed members'
   * read positions go, there and in each topic.
   */
  private async afterChange(conv: string, change: MembershipChange, result: MembershipResult): Promise<void> {
    const threshold = this.options.largeGroupThreshold;
    const topics = await inheritMembership(this.engine, threshold, conv, { ...change, gens: result.gens });
    const [left] = await Promise.all([
      change.remove.length > 0 ? leaveThreads(this.engine, threshold, conv, change.remove) : [],
      change.category !== undefined ? categoryToThreads(this.engine, threshold, conv) : undefined,
    ]).catch((err: unknown) => {
      throw afterPartOfIt(err);
    });
    // Read receipts: the positions of the threads they left go too.
    for (const { uid, threads } of left) for (const child of threads) await this.receipts.left(child, [uid]);
    await this.receipts.left(conv, change.remove);
    if (change.remove.length > 0) for (const topic of topics) await this.receipts.left(topicConv(conv, topic), change.remove);
  }

  private threadOptions(): ThreadOptions {
    return {
      threshold: this.options.largeGroupThreshold,
      cap: this.options.threadFollowCap ?? LIMITS.threadsFollowedPerConversation,
      ...(this.onFollowDropped ? { onFollowDropped: this.onFollowDropped } : {}),
    };
  }

  /**
   * `uid` follows the thread `(conv, root)` (PROTOCOL.md "Threads"): 'followed', or 'following'
   * when they did already. `unknown_conversation`, `not_a_member` (of `conv`), `limit_exceeded`.
   */
  async followThread(uid: string, conv: string, root: number): Promise<'followed' | 'following'> {
    return followOrRefuse(this.engine, this.threadOptions(), conv, root, uid);
  }

  /** `uid` stops following the thread: its row goes (idempotent); whether they followed it. */
  async unfollowThread(uid: string, conv: string, root: number): Promise<boolean> {
    const followed = await unfollow(this.engine, this.options.largeGroupThreshold, conv, root, uid);
    // Read receipts: the follower's position in the thread goes, as a leaver's does.
    if (followed) await this.receipts.left(threadConv(conv, root), [uid]);
    return followed;
  }

  /** `gen`: the read generation the read was made in (rules.ts: an older one than the record's is ignored). */
  async read(uid: string, conv: string, seq: number, gen?: number): Promise<UserOpResult> {
    const asked: AskedRead = gen === undefined ? [conv, seq] : [conv, seq, gen];
    const [capped = asked] = this.options.readCap ? await this.options.readCap.apply([asked]) : [];
    const sharing = this.receipts.sharing(uid);
    // Settled even when the read fails (no unhandled rejection); raise() reads it again then.
    sharing.catch(() => undefined);
    const result = await this.applyMemberOp(readOp(uid, capped));
    // Read receipts: "has seen up to" only rises (an unread-from never lowers it: no raise there).
    await this.receipts.raise(uid, readsOf([result]), sharing);
    return result;
  }

  /**
   * "Unread from here": `seq` and every message after it become unread on every device (rules.ts
   * `unread-from`). The head is read first: a seq above it (nothing there to mark) is refused, and
   * so is an unknown conversation. `gen`: the read generation the act is based on plus one.
   */
  async unreadFrom(uid: string, conv: string, seq: number, gen?: number): Promise<UserOpResult> {
    const head = (await this.engine.heads([conv])).get(conv);
    if (head === undefined) throw unknownConversation([conv]);
    if (seq > head) throw new RedpointError('invalid_request', `seq ${seq} is above the conversation's head: there is nothing from it on to mark unread`);
    // Floored at the join head (what came before the join was never the user's to read), checked
    // against the membership in the user step: a rejoin in between makes the act a no-op.
    const tag = await this.engine.joinTag(conv, uid);
    const floor = tag ? { floor: tag.joinHead, joinGen: tag.joinGen } : {};
    return this.applyMemberOp({ type: 'unread-from', uid, conv, seq, ...(gen !== undefined ? { gen } : {}), ...floor });
  }

  /**
   * A batch of reads from one device, applied in one user step. Conversations the user is not a
   * member of are reported back, not applied.
   */
  async readBatch(uid: string, asked: readonly AskedRead[]): Promise<BatchResult> {
    const reads = this.options.readCap ? await this.options.readCap.apply(asked) : asked;
    const ops: UserOp[] = reads.map((read) => readOp(uid, read));
    const started = performance.now();
    const sharing = this.receipts.sharing(uid);
    sharing.catch(() => undefined);
    const results = await this.engine.applyUserOps(ops);
    this.onStoreCall?.('read', (performance.now() - started) / 1000);
    await this.receipts.raise(uid, readsOf(results), sharing);
    const rejected = await refusals(
      this.engine,
      ops.filter((_, i) => !results[i]?.member).map((op) => op.conv),
    );
    // Every result, no-op or not, reports the user's version after it: the last one is the
    // cursor after the batch (one user's ops run in order), with no extra round trip.
    const last = results.at(-1);
    if (!last) return this.engine.position(uid).then((p) => ({ ...p, rejected }));
    return { epoch: last.epoch, version: last.version, rejected };
  }

  async position(uid: string): Promise<Cursor> {
    return this.engine.position(uid);
  }

  async deleteConversation(uid: string, conv: string): Promise<UserOpResult> {
    return this.updateSettings(uid, conv, { deleted: true });
  }

  /** Flags and delete as ONE change (one version): the delete first, then the flags. */
  async updateSettings(uid: string, conv: string, change: SettingsChange): Promise<UserOpResult> {
    if (change.level !== undefined && change.muted !== undefined && change.muted !== (change.level === 'none')) {
      throw new RedpointError('invalid_request', `muted: ${String(change.muted)} contradicts level: '${change.level}' (muted is level 'none')`);
    }
    let deleteAt: number | undefined;
    if (change.deleted) {
      const info = await this.engine.getConversation(conv);
      if (!info) throw unknownConversation([conv]);
      deleteAt = info.maxSeq;
    }
    const result = await this.applyMemberOp({
      type: 'settings',
      uid,
      conv,
      ...(change.muted !== undefined ? { muted: change.muted } : {}),
      ...(change.level !== undefined ? { level: change.level } : {}),
      ...(change.markedUnread !== undefined ? { markedUnread: change.markedUnread } : {}),
      ...(deleteAt !== undefined ? { deleteAt } : {}),
    });
    // A delete reads the conversation up to its head.
    if (deleteAt !== undefined) await this.receipts.raise(uid, readsOf([result]));
    return result;
  }

  async pull(uid: string, since: Cursor | null, limit: number = LIMITS.pullPageDefault): Promise<PullReply> {
    const started = performance.now();
    const sharing = this.receipts.sharing(uid);
    sharing.catch(() => undefined);
    const stored = await this.engine.pull(uid, since, Math.min(Math.max(1, limit), LIMITS.pullPageMax));
    this.onStoreCall?.('pull', (performance.now() - started) / 1000);
    // Peers' read positions of the one-to-one conversations in this page, read now like heads:
    // not part of the stream (a peer's read never bumps this user's version).
    // (A read-diffused conversation is never one-to-one: not read.)
    const pageConvs = [...(stored.snapshot?.convs ?? []), ...stored.entries.flatMap((e) => (e.state ? [e.state] : []))].filter(hasPeer).map((s) => s.conv);
    const [{ heads, extras }, peers, mutedMentions] = await Promise.all([
      this.largeReads(stored.largeConvs, stored.heads),
      this.receipts.peerReads(uid, [...new Set(pageConvs)], sharing),
      this.mutedMentionsOf(uid, stored),
    ]);
    const { largeConvs: _ignored, heads: _read, mutedMentions: _stored, ...rest } = stored;
    return {
      ...rest,
      heads,
      ...extras,
      ...(peers.size > 0 ? { peerReads: Object.fromEntries(peers) } : {}),
      ...(mutedMentions ? { mutedMentions: true as const } : {}),
    };
  }

  /** The badge numbers. `total` = stored totals (write-diffused) + read-diffused groups summed now. */
  async unread(uid: string): Promise<UnreadSummary> {
    const started = performance.now();
    const sharing = this.receipts.sharing(uid);
    sharing.catch(() => undefined);
    const stored = await this.engine.userState(uid);
    this.onStoreCall?.('user_state', (performance.now() - started) / 1000);
    // The peers' positions alongside the read-diffused conversations' reads (independent).
    const [peers, { heads, extras }, mutedMentions] = await Promise.all([
      this.receipts.peerReads(
        uid,
        stored.states.filter(hasPeer).map((s) => s.conv),
        sharing,
      ),
      this.largeReadsOf(stored),
      this.mutedMentionsOf(uid, stored),
    ]);
    return {
      uid,
      epoch: stored.epoch,
      version: stored.version,
      ...badgeTotals(stored, heads, extras, mutedMentions),
      conversations: conversationViews(stored.states, heads, extras).map((view) => {
        const peer = peers.get(view.conv);
        return peer === undefined ? view : { ...view, peerReadSeq: peer };
      }),
      ...(mutedMentions ? { mutedMentions: true as const } : {}),
    };
  }

  /**
   * The badge alone (the badge hook's fold): `unread`'s totals, without the rows or the peers'
   * positions, so without their reads.
   */
  async badge(uid: string): Promise<Pick<UnreadSummary, 'total' | 'mentions' | 'categories'>> {
    const stored = await this.engine.userState(uid);
    const [{ heads, extras }, mutedMentions] = await Promise.all([this.largeReadsOf(stored), this.mutedMentionsOf(uid, stored)]);
    return badgeTotals(stored, heads, extras, mutedMentions);
  }

  /**
   * The user's settings (PUT /v1/users/:uid/settings and the `user-settings` frame): each one
   * given is applied. None is refused, also when a key is there with no value: MessagePack can
   * carry a key whose value is `undefined` (msgpackr's encoding of a JS field left undefined),
   * which the schema counts as present.
   */
  async setUserSettings(uid: string, settings: { shareReads?: boolean; mutedMentions?: boolean }): Promise<void> {
    if (settings.shareReads === undefined && settings.mutedMentions === undefined) {
      throw new RedpointError('invalid_request', 'nothing to change: send at least one of shareReads, mutedMentions');
    }
    if (settings.shareReads !== undefined) await this.receipts.setSharing(uid, settings.shareReads);
    if (settings.mutedMentions !== undefined) await this.setMutedMentions(uid, settings.mutedMentions);
  }

  /**
   * The user's setting `mutedMentions` (PROTOCOL.md "Notification levels"): written, then the
   * user's stream starts over from a snapshot (a new epoch, the version up by one, a push), so
   * every device pulls. A pull reads the setting in the same atomic step as the stream (the
   * engine's pull; likewise userState for /unread and the badge), so a device whose pull saw the
   * restart sees the setting that caused it, by construction: no read can fall between the two.
   * Every call restarts the stream, the same value again too: a call that failed between the two
   * steps is repaired by its retry. With the badge hook on the user is marked (the badge may have
   * moved; rebuilds mark nothing).
   */
  async setMutedMentions(uid: string, on: boolean): Promise<void> {
    await this.engine.readPositions.setMutedMentions(uid, on);
    await adminOf(this.engine).rebuildUser(uid, { restream: true });
    if (this.options.badgeMarks) await this.engine.badgeMarks().markUsers([uid], Date.now());
  }

  /**
   * The setting as the engine read it with the stream; only when the store does not know it
   * (Redis lost the key, the durable tier on) is it read apart, from PostgreSQL: a rare read, and
   * one that comes back in Redis for the next.
   */
  private async mutedMentionsOf(uid: string, stored: { mutedMentions?: boolean }): Promise<boolean> {
    return stored.mutedMentions ?? this.engine.readPositions.mutedMentions(uid);
  }

  private largeReadsOf(stored: StoredUserState): Promise<{ heads: Record<string, number>; extras: LargeExtras }> {
    return this.largeReads(
      stored.states.filter((s) => s.large).map((s) => s.conv),
      stored.heads,
    );
  }

  /**
   * The read-diffused conversations' heads, then their extras: a conversation Redis lost is
   * restored once, by the heads' read, not by both reads at once (headExtras restores by itself
   * too, so either order is correct; this one reads PostgreSQL once). Pulls, `/unread` and the badge.
   */
  private async largeReads(
    convs: readonly string[],
    known: ReadonlyMap<string, number> | undefined,
  ): Promise<{ heads: Record<string, number>; extras: LargeExtras }> {
    const heads = Object.fromEntries(await this.headsOf(convs, known));
    return { heads, extras: await this.extrasOf(convs) };
  }

  /** Issue 43: the read-diffused conversations' last activity, @all and non-counting seqs (PullReply `headAt`, `mentionAll`, `nocount`), only those that have any. */
  private async extrasOf(convs: readonly string[]): Promise<LargeExtras> {
    if (convs.length === 0) return {};
    const found = await this.engine.headExtras(convs);
    if (found.size === 0) return {};
    // Object.fromEntries defines own properties: a conversation named `__proto__` stays data.
    const atEntries: [string, number][] = [];
    const allEntries: [string, number[]][] = [];
    const nocountEntries: [string, number[]][] = [];
    for (const [conv, extra] of found) {
      if (extra.at > 0) atEntries.push([conv, extra.at]);
      if (extra.mentionAll.length > 0) allEntries.push([conv, extra.mentionAll]);
      if (extra.nocount.length > 0) nocountEntries.push([conv, extra.nocount]);
    }
    return {
      ...(atEntries.length > 0 ? { headAt: Object.fromEntries(atEntries) } : {}),
      ...(allEntries.length > 0 ? { mentionAll: Object.fromEntries(allEntries) } : {}),
      ...(nocountEntries.length > 0 ? { nocount: Object.fromEntries(nocountEntries) } : {}),
    };
  }

  /**
   * The heads of `convs`: those the store read along with the user's state (`known`), and the rest
   * read now (all of them on a Cluster, none on one Redis unless a conversation is missing there:
   * heads() restores it when the durable tier is on).
   */
  private async headsOf(convs: readonly string[], known: ReadonlyMap<string, number> | undefined): Promise<Map<string, number>> {
    const heads = new Map<string, number>();
    const missing: string[] = [];
    for (const conv of convs) {
      const head = known?.get(conv);
      if (head === undefined) missing.push(conv);
      else heads.set(conv, head);
    }
    if (missing.length > 0) for (const [conv, head] of await this.engine.heads(missing)) heads.set(conv, head);
    return heads;
  }

  /** Waits for in-flight flushes (graceful shutdown); receipts' announcements still waiting are dropped. */
  async idle(): Promise<void> {
    await this.ingest.idle();
    this.receipts.close();
  }

  private async applyMemberOp(op: UserOp): Promise<UserOpResult> {
    const [result] = await this.engine.applyUserOps([op]);
    if (result?.member) return result;
    throw await refusal(this.engine, op.uid, op.conv);
  }
}

/** What extrasOf gives: PullReply's `headAt`, `mentionAll` and `nocount`, those that have any. */
type LargeExtras = Pick<PullReply, 'headAt' | 'mentionAll' | 'nocount'>;

/**
 * The totals of a user's state: the stored ones cover the write-diffused conversations; the
 * read-diffused ones are added now, from their heads.
 */
function badgeTotals(
  stored: StoredUserState,
  heads: Record<string, number>,
  extras: HeadExtras,
  mutedMentions: boolean,
): Pick<UnreadSummary, 'total' | 'mentions' | 'categories'> {
  const totals: Totals = { total: stored.totals.total, mentions: stored.totals.mentions, categories: new Map(stored.totals.categories) };
  for (const state of stored.states) {
    // The stored totals leave every muted conversation out (rules.ts contribution): with
    // mutedMentions on, the muted write-diffused ones' shares are added here, as the large ones'.
    const view = state.large || (mutedMentions && state.muted) ? toView(state, heads, extras) : null;
    if (view) addToTotals(totals, view, mutedMentions);
  }
  // Object.fromEntries defines own properties: a category named `__proto__` stays data.
  return { total: totals.total, mentions: totals.mentions, categories: Object.fromEntries(totals.categories) };
}

/** The read positions a user step left (member results only). */
function readsOf(results: readonly UserOpResult[]): Array<{ conv: string; seq: number }> {
  const out: Array<{ conv: string; seq: number }> = [];
  for (const r of results) if (r.member && r.state) out.push({ conv: r.state.conv, seq: r.state.readSeq });
  return out;
}

function readOp(uid: string, [conv, seq, gen]: AskedRead): UserOp {
  return gen === undefined ? { type: 'read', uid, conv, seq } : { type: 'read', uid, conv, seq, gen };
}

/**
 * Whether a row may show a one-to-one peer's read position (PROTOCOL.md "Read receipts"): never
 * a read-diffused conversation (never one-to-one), nor a thread's row (two followers of a thread
 * are not a one-to-one chat; PROTOCOL.md "Threads").
 */
function hasPeer(state: { conv: string; large: boolean }): boolean {
  return !state.large && !isThreadConv(state.conv);
}
