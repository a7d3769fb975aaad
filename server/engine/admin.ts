import type { ConvEntry, Snapshot } from '../../protocol/types.js';
import type { ConvInfo, MemberTag } from './engine.js';
import { contribution, type StoredConv } from './rules.js';

/**
 * What the operator's toolbox (server/admin/) needs from a store beyond the Engine: walk every
 * user and conversation, read one user's or one conversation's raw state for checking, and the
 * few repairs and removals that no Engine method does. Every repair of a record goes through
 * `Engine.applyUserOps` (the rules); what is here rebuilds only what the records determine
 * (totals, counts, indexes, the stream) or removes things.
 *
 * Atomicity, as for the Engine: each method below that names one user is one atomic step on that
 * user, and each that names one conversation is one atomic step on that conversation. Walks
 * (`scanUsers`, `scanConversations`) are not atomic: an id present during the whole walk is
 * returned at least once, and may be returned more than once.
 */
export interface EngineAdmin {
  /** Whether streams and snapshots expire while idle (STREAM_IDLE_SECONDS): then a missing one is no finding. */
  readonly streamsExpire: boolean;
  /** One page of a walk over every user with any state; `cursor` '' starts, a returned '' ends. */
  scanUsers(cursor: string, count: number): Promise<ScanPage>;
  /** One page of a walk over every conversation (deleted ones that are not fully removed included). */
  scanConversations(cursor: string, count: number): Promise<ScanPage>;
  /** Everything stored for one user, read in one atomic step. Never creates anything. */
  readUser(uid: string): Promise<RawUser>;
  /** One conversation with every member and its join tag, in one atomic step; null when it does not exist. */
  readConversation(conv: string): Promise<RawConversation | null>;
  /** For each conversation: its meta and the join tag of `uid` (one atomic read each). */
  conversationViews(uid: string, convs: readonly string[]): Promise<Map<string, ConversationView>>;
  /** The record of each (uid, conv) pair, or null (for checking a conversation's members). */
  records(pairs: readonly { uid: string; conv: string }[]): Promise<(StoredConv | null)[]>;

  /**
   * Rebuilds what the user's records determine, atomically: stored totals, member count, the
   * index of read-diffused conversations. With `restream`, the stream also starts over: a new
   * epoch, the version raised by one, a snapshot built from the records at it, no entries before
   * it, and a notification so connected clients pull (and get that snapshot).
   */
  rebuildUser(uid: string, options: { restream: boolean }): Promise<void>;
  /**
   * Repairs a conversation's own fields atomically: the member count is recounted, and the
   * generation raised to at least `minGen` (so that the roster's membership ops win over records
   * that are ahead of a conversation that lost writes). Returns the conversation after.
   */
  repairConversation(conv: string, minGen: number): Promise<RawConversation | null>;
  /**
   * The conversation step of a rebase (admin/rebase.ts), atomically: the head is lowered to `seq`
   * when it is above, the generation raised past every one given, and every member's join tag
   * set to that generation and a join head at most the new head. Returns the step, with the new
   * tags; null when the conversation does not exist.
   */
  rebaseConversation(conv: string, seq: number): Promise<RebaseStep | null>;
  /**
   * Deletes every key of the user if its records are still exactly `expected` (one atomic step);
   * false when they changed (the caller looks again). Connected clients are told to pull.
   */
  wipeUser(uid: string, expected: readonly StoredConv[]): Promise<boolean>;
  /**
   * The conversation step of deleting `conv`: it stops existing as a conversation at once (a
   * message for it is refused, a membership change creates a new one), its roster moves to a
   * deletion record under a generation newer than every one it gave, and the members still to
   * be removed are returned. Repeating it returns the same deletion until `finishDelete`; on a
   * conversation that was re-created meanwhile it merges the new members in under a newer
   * generation. Null when there is neither a conversation nor an unfinished deletion.
   */
  beginDelete(conv: string): Promise<DeleteStep | null>;
  /** Drops the deletion record, unless a newer deletion (another `gen`) took it over. */
  finishDelete(conv: string, gen: number): Promise<void>;
  /** Which of `convs` list `uid` as a member (for erase verification). */
  convsListing(uid: string, convs: readonly string[]): Promise<string[]>;
}

export interface ScanPage {
  cursor: string;
  ids: string[];
}

export interface RawMeta {
  epoch: string;
  version: number;
  /** Entries with v <= base are trimmed. */
  base: number;
  snapshotVersion: number;
  memberCount: number;
  totals: { total: number; mentions: number; categories: Map<string, number> };
  /** Redis: the run id the epoch was last used under (the epoch rotates at the next step under another). */
  runId?: string;
  /** Redis: the run id of the server holding the user's keys now. */
  currentRunId?: string;
}

export interface RawUser {
  uid: string;
  /** Null: the store holds no meta (a user never seen, one with only pending records, or erased). */
  meta: RawMeta | null;
  records: StoredConv[];
  /** The index of read-diffused conversations the user is a member of (Redis `L`; memory: derived, so always right). */
  largeIndex: string[];
  /** The stream as stored: how many entries it holds, and those after the snapshot. */
  stream: { length: number; afterSnapshot: ConvEntry[] };
  /** The newest snapshot; null when it expired (or is missing). */
  snapshot: Snapshot | null;
  /** Seconds the stream and the snapshot live on without changes (-1: no expiry, -2: absent). */
  ttl: { stream: number; snapshot: number };
}

export interface RawConversation {
  info: ConvInfo;
  /** Generation of an unfinished member rewrite (0: none). */
  rewrite: number;
  /** The member count the conversation stores (compare with `members.length`). */
  storedCount: number;
  members: MemberTag[];
  /** A deletion begun and not finished (the roster is the deletion record's). */
  deleting: boolean;
}

/** A conversation as seen from one user's record: its meta and the user's join tag there. */
export interface ConversationView {
  exists: boolean;
  info: ConvInfo | null;
  rewrite: number;
  /** Null: the conversation does not list the user. */
  tag: { joinGen: number; joinHead: number } | null;
}

export interface RebaseStep {
  /** The head before the step, and after it (the lower of it and the seq asked for). */
  before: number;
  head: number;
  gen: number;
  large: boolean;
  category: string;
  /** Every member, with its new tag. */
  members: MemberTag[];
}

export interface DeleteStep {
  gen: number;
  /** The head when deleted: every member's record is hidden up to it, then left. */
  maxSeq: number;
  members: string[];
}

/** What the stored totals must be: the sum of every record's contribution (rules.ts). */
export function totalsOfRecords(records: Iterable<StoredConv>): RawMeta['totals'] {
  const totals = { total: 0, mentions: 0, categories: new Map<string, number>() };
  for (const rec of records) {
    const c = contribution(rec);
    totals.total += c.unread;
    totals.mentions += c.mentions;
    if (c.unread !== 0) totals.categories.set(c.category, (totals.categories.get(c.category) ?? 0) + c.unread);
  }
  return totals;
}

/** An engine that offers the operator's view of its store (both engines do). */
interface AdministeredEngine {
  admin(): EngineAdmin;
}

/** The EngineAdmin of `engine`; throws for an engine without one. */
export function adminOf(engine: object): EngineAdmin {
  const candidate = engine as Partial<AdministeredEngine>;
  if (typeof candidate.admin !== 'function') throw new Error('this engine has no admin interface');
  return candidate.admin();
}
