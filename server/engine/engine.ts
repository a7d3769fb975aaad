import type { ConvEntry, ConvState, Cursor, MessageEvent, Snapshot } from '../../protocol/types.js';
import type { BadgeMarks } from './badge-marks.js';
import type { DurableStore } from './durable-backing.js';
import type { Notifications } from './notifications.js';
import type { MemberTag, UserOp } from './ops.js';
import type { ReadPositions } from './read-positions.js';
import type { ClaimOutcome } from './rules.js';

export type { MembershipOp, MemberTag, UserOp } from './ops.js';

/**
 * The store behind Redpoint, shaped by the domain (record a message, change a membership, apply
 * a user's ops, pull since a cursor), not by Redis. Two implementations, `memory` and `redis`,
 * pass one conformance suite. Several server processes may call one store at the same moment for
 * the same user or conversation: every ordering the state depends on is made here, inside one
 * atomic step, never by a lock or a cache in a process (DESIGN.md §9).
 *
 * What is atomic with what:
 *
 * - **A conversation step** (`changeMembers`, each item of `recordMessages`, `roster`,
 *   `finishRewrite`, `getConversation`) is atomic on that conversation. `changeMembers` changes the
 *   member set, re-decides write/read diffusion against the threshold, bumps the conversation's
 *   membership generation and reads each added member's join head — all at once. `recordMessages` raises the
 *   head and reads who is a member at that same instant: the members of a write-diffused
 *   conversation, or which of the named candidates (senders, mentioned users) are members of a
 *   read-diffused one. Nothing spans two conversations.
 * - **A user step** is atomic on that user: everything `applyUserOps` does for one user's ops (in
 *   the order given) — records, stored totals, version (+1 per visible change, never otherwise),
 *   stream entry, snapshot, trimming — and the notification of those changes. Ops of different
 *   users are independent and may be applied in any order relative to each other.
 * - **Between the two** there is no atomicity: a membership change and a message are a
 *   conversation step followed by user steps, and another process may run anything in between.
 *   The rules make every interleaving converge: user records are max-registers; membership ops
 *   carry the conversation's generation and only a newer one wins; a message op for a user the
 *   conversation step listed as a member, but whose join op has not landed yet, is kept on the
 *   user's record ("pending") and counted once the join lands. See rules.ts.
 * - **Notifications** of a user's changes are published inside the user step, so every process
 *   hears one user's changes in version order (`notifications`). Head changes of read-diffused
 *   conversations are published inside `recordMessages`.
 *
 * Every method may be retried after any failure: a repeat of a conversation step reports the same
 * joins, leaves and pending rewrite again (it never skips work because a first attempt already
 * wrote part of it), and repeating user ops is harmless.
 */
export interface Engine {
  readonly kind: EngineKind;
  /** Changes of users and heads of large groups, as published by the store. */
  readonly notifications: Notifications;
  /** Read receipts: the members' read positions per conversation and the sharing setting (read-positions.ts). */
  readonly readPositions: ReadPositions;

  /**
   * One membership change of `conv`, atomically: creates the conversation if needed, replaces its
   * category when given, adds and removes members, decides write or read diffusion (`large` when
   * more than `threshold` members), and returns what the user steps must then apply.
   */
  changeMembers(conv: string, change: MembersChange): Promise<MembersStep>;
  /** The conversation with every member and its join tag, read in one atomic step (for a rewrite). */
  roster(conv: string): Promise<Roster | null>;
  /**
   * One member's join tag now (null: not a member, or no such conversation), read from the
   * conversation alone: what an "unread from here" is floored at (SyncService.unreadFrom), and
   * whether a thread's follower is a member of the conversation and the thread (sync/threads.ts).
   * With the durable tier, a conversation the store lost or evicted is restored first.
   */
  joinTag(conv: string, uid: string): Promise<MemberTag | null>;
  /** Clears the conversation's pending rewrite if it is still the one of `gen` (a newer change keeps its own). */
  finishRewrite(conv: string, gen: number): Promise<void>;
  getConversation(conv: string): Promise<ConvInfo | null>;
  /** The conversations among `convs` that do not exist (ingest refuses requests naming one). */
  missingConversations(convs: readonly string[]): Promise<string[]>;
  /**
   * For each conversation: raises its maxSeq to `seq` (max-merge) and reads, in the same atomic
   * step, who is a member: all members when write-diffused, else which of `candidates` are. Null
   * for an unknown conversation (nothing is created). A raised head of a read-diffused
   * conversation is published (`at`: arrival time of the messages, for the push-lag metric). Each
   * conversation is its own step (the store may run several in one call).
   */
  recordMessages(items: readonly MessageRecord[], at?: number): Promise<(RecordedMessage | null)[]>;
  /**
   * Optional: a whole ingest flush where the store can do it in fewer calls than the two steps:
   * `recordMessages(items, at)`, then `applyUserOps` of the message ops ingest.ts `mergeOps`
   * derives from `messages` and the members read (no results). The same outcome as the two steps
   * (nothing running between them is one of their interleavings); returns what recordMessages
   * would, except that `members` may be left empty (the store used them itself: a reply listing
   * every member costs the store more than the rest of it, and the caller needs only which
   * conversations exist), and how many user ops it applied. A failure after some of it landed is
   * an OutcomeUnknownError.
   */
  recordAndApply?(
    items: readonly MessageRecord[],
    messages: readonly MessageEvent[],
    at: number,
  ): Promise<{ recorded: (RecordedMessage | null)[]; userOps: number }>;
  /** Current maxSeq of each conversation (missing ones are left out). */
  heads(convs: readonly string[]): Promise<Map<string, number>>;
  /** The HeadExtra of each read-diffused conversation that has one (missing ones, and those with nothing, are left out; with the durable tier, ones Redis lost are restored first, as heads() does). */
  headExtras(convs: readonly string[]): Promise<Map<string, HeadExtra>>;

  /**
   * Applies per-user ops: one atomic step per user (their ops in the given order), users
   * pipelined in one round trip where the store allows. Results come back in op order.
   */
  applyUserOps(ops: readonly UserOp[], options?: ApplyOptions): Promise<UserOpResult[]>;
  /** The user's changes after `since`, or the newest snapshot and what follows it. */
  pull(uid: string, since: Cursor | null, limit: number): Promise<StoredPull>;
  /** The user's current cursor; a user the store has never seen gets version 0 and a fresh epoch (nothing is created). */
  position(uid: string): Promise<Cursor>;
  /** Every conversation the user is a member of, with the stored totals (write-diffused part). */
  userState(uid: string): Promise<StoredUserState>;
  /**
   * The conversation cap's step (sync/conversation-cap.ts), before `changeMembers` adds `uids` to
   * `conv`: for each user, atomically on that user, rules.ts `claimOutcome` over the user's
   * member count and live claims. A `claimed` join is counted against the user's cap from then
   * on, by every process, until a membership op of `conv` lands on the user's record (its join:
   * the member count has it then; or a newer op that won over it) or `holdMs` pass (a call that
   * failed between its claim and its join and was not retried): rules.ts `claimLive`. A repeat
   * keeps the claim (its hold starts over). Users are independent steps, in any order. With
   * `terms.within`, `held` counts only the conversations and claims under that prefix.
   */
  claimJoins(conv: string, uids: readonly string[], terms: ClaimTerms): Promise<JoinClaim[]>;

  /**
   * Topics (PROTOCOL.md "Topics"; sync/topics.ts runs the protocol): adds `topic` to `conv`'s
   * topic registry, atomically on `conv`, unless it holds `cap` topics already. 'added' and
   * 'present': registered, its child conversation not yet known complete; 'ready': registered and
   * `topicReady` was called; 'full': refused, nothing written; 'unknown': `conv` does not exist.
   * With the durable tier the registry is written through to PostgreSQL before the answer.
   */
  addTopic(conv: string, topic: string, cap: number): Promise<TopicAdd>;
  /** Marks a registered topic's child conversation complete (created with the parent's roster): later messages skip creating it. */
  topicReady(conv: string, topic: string): Promise<void>;
  /** `conv`'s registered topics (none for an unknown conversation), read in one atomic step. */
  topics(conv: string): Promise<string[]>;
  /** Forgets `conv`'s whole registry (and the durable tier's copy): the operator's delete of the conversation, once its topics are deleted. */
  dropTopics(conv: string): Promise<void>;

  /**
   * Threads (PROTOCOL.md "Threads"; sync/threads.ts): adds `root` to `conv`'s thread registry
   * (idempotent), atomically with a check that `conv` exists: false, nothing written, when it does
   * not. Called before a thread's child is made, so every child is in the registry, followed or not.
   */
  addThread(conv: string, root: number): Promise<boolean>;
  /** The roots of `conv`'s registered threads (none for an unknown conversation). */
  threads(conv: string): Promise<number[]>;
  /** Forgets `conv`'s thread registry: the operator's delete of the conversation, once its threads are deleted. */
  dropThreads(conv: string): Promise<void>;

  /** The badge hook's marks (badge-marks.ts): written by the steps only when `EngineOptions.badgeMarks` is on. */
  badgeMarks(): BadgeMarks;

  /** The durable tier's side of this store (the drainer and the cold sweep call it); only stores with a durable tier behind them (Redis). */
  durableStore?(): DurableStore;

  /** True when the store answers and is ready to take writes. */
  ready(): Promise<boolean>;
  close(): Promise<void>;
}

export type EngineKind = 'memory' | 'redis';

/** What Engine.addTopic did. */
export type TopicAdd = 'added' | 'present' | 'ready' | 'full' | 'unknown';

export interface EngineOptions {
  /** Fewest entries between two snapshots of a user's stream (the interval grows with the user's conversations). */
  snapshotEvery: number;
  /** Most entries kept per user stream, and the largest snapshot interval. */
  streamMaxLen: number;
  /** Seconds a user's stream is kept without changes (0: forever); the records stay, clients get a snapshot. */
  streamIdleSeconds?: number;
  /**
   * The badge hook is on (BADGE_HOOK_*): user steps mark the users whose badge may have changed,
   * conversation steps the read-diffused conversations whose head moved (badge-marks.ts). Off:
   * nothing is marked, and the steps cost what they did without the hook.
   */
  badgeMarks?: boolean;
}

export interface ApplyOptions {
  /** When the message behind these ops reached the server (wall-clock ms), carried to pushes for the lag metric. */
  at?: number;
  /**
   * false: the caller does not read the results (ingest: the pushes carry the states), so the
   * store need not build, send and decode them, and the returned array is empty. The ops are
   * applied exactly the same. Default true.
   */
  results?: boolean;
}

export interface ConvInfo {
  conv: string;
  maxSeq: number;
  large: boolean;
  category: string;
  memberCount: number;
  /** Membership generation: raised by every membership change that changed something. */
  gen: number;
  /** Issue 43: the conversation's last activity (ms), where the step read it: membership ops give it to the members they make (absent: unknown). */
  at?: number;
}

export interface MembersChange {
  add: readonly string[];
  remove: readonly string[];
  /** Replaces the conversation's category for every member. */
  category?: string;
  /** More members than this → read diffusion. */
  threshold: number;
  /**
   * A topic's sync (sync/topics.ts): the parent's membership generation its roster was read at;
   * `add` is then that whole roster. A sync older than the one the conversation holds changes
   * nothing (no joins; as leaves only the uids of `remove` that are not members). Otherwise every
   * member not in `add` is removed too and reported among the leaves, and the conversation keeps
   * this generation: whichever order syncs land in, the newest roster wins.
   */
  sync?: number;
  /**
   * With `sync`, a delta: `add` and `remove` are not the whole roster but the change that took
   * the parent from its roster at this generation (its step's `fromGen`) to the one at `sync`.
   * Applied as a plain change only where the conversation holds the roster of this generation, or
   * of `sync` already (a repeat); a conversation holding an older roster, or none, answers
   * `behind` with nothing changed (the caller syncs the whole roster); one holding a newer one
   * changes nothing, as a stale whole sync.
   */
  syncFrom?: number;
}

export interface MembersStep {
  info: ConvInfo;
  /** Every uid of `add`, with its tag (an existing member keeps its own: a retry repeats the same join). */
  joins: MemberTag[];
  /** Every uid of `remove` (now not a member, whether it was before or not), and those a sync removed. */
  leaves: string[];
  /**
   * The mode or category changed (now, or in an earlier change whose rewrite was not finished):
   * every member's record must be rewritten from `roster`, then `finishRewrite`.
   */
  rewrite: boolean;
  /**
   * Issue 43: the conversation's non-counting seqs, given only when one lies above its head (a
   * recall before its message): a joiner's record in a write-diffused conversation takes those
   * above its join head.
   */
  nocount?: number[];
  /** The conversation's generation before this step (`info.gen` when nothing changed): a topic's delta sync starts from it. */
  fromGen: number;
  /** A delta sync (MembersChange.syncFrom) the conversation was not ready for: nothing changed, sync the whole roster. */
  behind?: true;
}

export interface Roster {
  info: ConvInfo;
  members: MemberTag[];
}

export interface MessageRecord {
  conv: string;
  seq: number;
  /** Senders and mentioned users: whose membership a read-diffused conversation must tell. */
  candidates: readonly string[];
  /** Issue 43, kept by a read-diffused conversation only (a write-diffused one's records keep them): the newest `at` of its messages ... */
  at?: number;
  /** ... and the seqs of its @all messages. */
  mentionAll?: readonly number[];
  /**
   * Issue 43, kept by every conversation: the seqs of the batch that stop counting (its
   * `counts: false` messages and the seqs its messages recall), merged into the conversation's set.
   */
  nocount?: readonly number[];
  /** The (uid, seq) of each mention in the batch: a read-diffused conversation indexes them, so a later recall finds whose mention to drop. */
  mentioned?: ReadonlyArray<readonly [string, number]>;
}

/**
 * What a read-diffused conversation keeps beside its head (issue 43): its last activity (0:
 * unknown) and its @all seqs, ascending, the newest `LIMITS.mentionSeqsPerConversation`.
 */
export interface HeadExtra {
  at: number;
  mentionAll: number[];
  /**
   * The conversation's non-counting seqs (issue 43: `counts: false` messages and recalled seqs,
   * kept in either mode), ascending, the newest `LIMITS.nocountSeqsPerConversation`.
   */
  nocount: number[];
}

export interface RecordedMessage {
  info: ConvInfo;
  /** The members, read with the head: all of them when write-diffused, else the candidates who are members. */
  members: string[];
  /**
   * Issue 43, read-diffused only: per member, the seqs recalled now whose mention the
   * conversation's index says the member's record holds (their op takes them as non-counting
   * seqs, which drops the mention) ...
   */
  drops?: ReadonlyMap<string, readonly number[]>;
  /** ... and the seqs this batch mentions them in that were recalled already (left out of their op). */
  ahead?: ReadonlyMap<string, readonly number[]>;
}

export interface UserOpResult {
  /** False when the op changed nothing visible (a duplicate, an older seq or generation, a non-member). */
  changed: boolean;
  member: boolean;
  epoch: string;
  /** The user's version after the op. */
  version: number;
  /** The conversation's state after the op (null when the user is not a member). */
  state: ConvState | null;
}

export interface StoredPull {
  epoch: string;
  snapshot?: Snapshot;
  entries: ConvEntry[];
  version: number;
  more: boolean;
  /** Read-diffused conversations the user is a member of. */
  largeConvs: string[];
  /**
   * Heads of those conversations read in the same step, when the store can (one Redis: the
   * conversations' keys are on the same server); those missing here are read with `heads()`.
   */
  heads?: Map<string, number>;
  /** The user's setting, read in the same step, as StoredUserState's. */
  mutedMentions?: boolean;
}

export interface ClaimTerms {
  /** MAX_CONVERSATIONS_PER_USER (above 0), or the cap on the conversations `within` names. */
  cap: number;
  /** How long a claim counts without its membership op landing (ms). */
  holdMs: number;
  /**
   * Counts only the user's conversations whose id starts with this (and the live claims of such
   * joins): a thread follow's cap, LIMITS.threadsFollowedPerConversation over `threadPrefix(parent)`
   * (sync/threads.ts). Absent: every conversation of the user.
   */
  within?: string;
}

export interface JoinClaim {
  uid: string;
  outcome: ClaimOutcome;
  /** The user's conversations and live claims of other joins, as the claim counted them. */
  held: number;
}

export interface StoredUserState {
  epoch: string;
  version: number;
  states: ConvState[];
  /** Stored totals over write-diffused, visible, unmuted conversations. */
  totals: { total: number; mentions: number; categories: Map<string, number> };
  /** Heads of the read-diffused conversations read in the same step, as StoredPull's. */
  heads?: Map<string, number>;
  /**
   * The user's setting `mutedMentions` (ReadPositions.mutedMentions), read in the same step as
   * the records. Absent when the store does not know it (Redis lost the key and the durable tier
   * holds it): the caller then asks ReadPositions.mutedMentions, which loads it.
   */
  mutedMentions?: boolean;
}

/** The epoch of a user the store has never seen (defined with the wire contract). */
export { UNSEEN_EPOCH } from '../../protocol/types.js';
