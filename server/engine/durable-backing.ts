import type { MemberTag } from './ops.js';
import type { StoredConv } from './rules.js';

/**
 * What an engine needs of the system of record behind it (server/durable/, PostgreSQL) to put
 * back what it no longer holds: a user or a conversation missing from the store is loaded from
 * here and max-merged in before the request that touched it applies (DESIGN.md §10). The engine
 * owns the atomic restore; this port only reads.
 */
export interface DurableBacking {
  /** The persisted records of each user found (users with no row are left out). */
  loadUsers(uids: readonly string[]): Promise<Map<string, PersistedUser>>;
  /** The persisted state of each conversation found (with every member's join tag). */
  loadConversations(convs: readonly string[]): Promise<Map<string, PersistedConversation>>;
  /** Read receipts' registers and settings (server/durable/pg-read-positions.ts); absent: not kept. */
  readonly readPositions?: ReadPositionsBacking;
  /** Topic registries (server/durable/pg-registries.ts); absent: not kept (a conversation Redis lost comes back without its topics). */
  readonly topics?: RegistryBacking;
  /** Thread registries, roots as their decimal text (pg-registries.ts); absent: not kept (a thread nobody follows is lost with Redis). */
  readonly threads?: RegistryBacking;
}

/** A conversation's registry of children (topics, threads): what Engine.addTopic and addThread write through and a conversation's restore reads back. */
export interface RegistryBacking {
  /** Idempotent. */
  save(conv: string, entry: string): Promise<void>;
  load(convs: readonly string[]): Promise<Map<string, string[]>>;
  drop(conv: string): Promise<void>;
}

export interface PersistedUser {
  /** The largest write clock among the rows: the restored user's clock starts above it. */
  w: number;
  records: StoredConv[];
}

export interface PersistedConversation {
  maxSeq: number;
  large: boolean;
  category: string;
  gen: number;
  /** Generation of a member rewrite that was not finished (null: none). */
  rewriteGen: number | null;
  members: MemberTag[];
  /** Issue 43 (engine.ts HeadExtra), as PostgreSQL holds them (written with the head): the last activity (0: none) and the @all seqs. */
  at?: number;
  mentionAll?: number[];
  /** The head when it became read-diffused ('#L'), written with the whole state. */
  largeFrom?: number;
  /** Issue 43: the non-counting seqs ('#N', engine.ts HeadExtra.nocount), written with the head. */
  nocount?: number[];
  /**
   * A topic's child: the parent generation of the newest roster synced into it (MembersChange.sync,
   * conv_members.lua '#P'; 0: none), written with the roster. A child back from PostgreSQL refuses
   * an older roster as it did before Redis lost it.
   */
  parentGen?: number;
}

/** The engine side of the durable tier: what the drainer and the cold sweep call (server/durable/). */
export interface DurableStore {
  /** How many shards the marks are spread over: 1 on one Redis, one per slot on a cluster. */
  readonly shardCount: number;
  /** The shards among `start..start+count-1` that hold any mark or activity. */
  busyShards(start: number, count: number): Promise<DirtyShard[]>;
  /** The dirty marks of one shard, oldest first: users' records and conversations not yet in PostgreSQL (`only`: one kind, the other left empty). */
  dirty(shard: DirtyShard, limit: number, only?: 'users' | 'convs'): Promise<{ users: DirtyMark[]; convs: DirtyMark[] }>;
  /** Marks in the whole store (for the backlog gauge; a cluster sums its busy shards). */
  backlog(shards: readonly DirtyShard[]): Promise<{ marks: number; oldest: number | null }>;
  /** How many record marks the shard holds. */
  recordMarks(shard: DirtyShard): Promise<number>;
  /**
   * Up to `limit` of the shard's record marks, oldest first from position `skip` (the drainer
   * skips what it has in flight), each with the record it names and its score (the record's version):
   * marks and state read together, atomically per call.
   */
  takeRecords(shard: DirtyShard, skip: number, limit: number): Promise<TakenRecord[]>;
  /** After PostgreSQL committed `records`, clears the marks of those not changed since they were taken (same score); returns how many. */
  clearRecords(shard: DirtyShard, records: readonly TakenRecord[]): Promise<number>;
  /** A conversation as the drainer writes it, with the texts of its head and generation, and `version`: what clearConversation('m') compares. */
  readConversation(conv: string): Promise<{ state: PersistedConversation; head: string; gen: string; version: string } | null>;
  /** The conversation's head (its text, for the clear) and the generation read with it (null: gone). */
  readHeads(
    shard: DirtyShard,
    convs: readonly string[],
  ): Promise<Array<{ head: string; gen: number; at: number; mentionAll: number[]; nocount: number[] } | null>>;
  /** After PostgreSQL committed these heads, clears the 'h|' marks of the conversations whose head is still as read; returns how many. */
  clearHeads(shard: DirtyShard, heads: ReadonlyArray<{ conv: string; head: string | null }>): Promise<number>;
  /** Clears a conversation's mark if what it was read with (`h`: the head text, `m`: readConversation's `version`; null: gone) is still `value`. */
  clearConversation(mark: 'h' | 'm', conv: string, value: string | null): Promise<boolean>;
  /**
   * The store's intact marks (keys.ts): how many shards lack theirs (they may have lost data);
   * with `force` they are set (a tier starting over an empty PostgreSQL, or after a full restore).
   */
  markIntact(force: boolean): Promise<number>;
  /** Users of `shard` whose last activity is older than `before` (ms), oldest first. */
  coldUsers(shard: DirtyShard, before: number, limit: number): Promise<string[]>;
  /**
   * Removes a cold user from the store if still cold and fully persisted: `outcome` 1 evicted (with
   * the conversations it had), 0 active, -1 not yet persisted.
   */
  evict(uid: string, before: number): Promise<{ outcome: 1 | 0 | -1; convs: string[] }>;
  /**
   * A conversation the cold sweep may evict: in Redis, at most `maxMembers` members and none of
   * them in Redis (all cold or gone). Its head and generation texts, or null. Plain reads: the
   * eviction itself checks again, atomically, what correctness needs.
   */
  evictableConversation(conv: string, maxMembers: number): Promise<{ head: string; gen: string } | null>;
  /** Removes the conversation if Redis still holds exactly `head` and `gen` (what PostgreSQL holds) and nothing of it waits for the drainer. */
  evictConversation(conv: string, head: string, gen: string): Promise<boolean>;
  /**
   * A user as the reconcile against the database compares it (server/durable/db-reconcile.ts):
   * whether Redis holds the user, its write clock, every record and which of them carry a dirty
   * mark. Read with plain commands, not atomically: a finding counts only if a second look agrees.
   */
  inspectUser(uid: string): Promise<InspectedUser>;
  /** Marks these records of the user dirty (kept if already marked): the drainer writes them again. */
  markUser(uid: string, convs: readonly string[]): Promise<void>;
  /** A conversation's head and generation texts in Redis (null: gone), a topic child's parent generation ('#P', 0: none) and whether its marks are set. */
  inspectConversation(conv: string): Promise<{ head: string; gen: string; parentGen: number; marked: { h: boolean; m: boolean } } | null>;
  /** Marks a conversation's head or roster dirty (kept if already marked). */
  markConversation(mark: 'h' | 'm', conv: string): Promise<void>;
}

export interface InspectedUser {
  /** False: Redis has no meta for the user (never seen, cold-evicted or lost; restored on touch). */
  present: boolean;
  w: number;
  /** conv -> record text (state-text.ts). */
  records: Map<string, string>;
  /** Convs whose record carries a dirty mark (not yet in PostgreSQL). */
  marked: Set<string>;
}

export type DirtyShard = string;

export interface DirtyMark {
  /** 'uid|conv' for a record; 'h|conv' or 'm|conv' for a conversation. */
  member: string;
  since: number;
}

/** One (user, conversation) record as PostgreSQL gets it (pg-store.ts writeRecords). */
export interface PersistedRecord {
  uid: string;
  conv: string;
  /** The row's version: the user's write clock `w` at the record's last change (its dirty mark's score). */
  w: number;
  /** The record text (state-text.ts) as read; null: the record is gone. */
  text: string | null;
}

/** A record mark taken by the drainer, with the state it names. */
export interface TakenRecord extends PersistedRecord {
  /** The mark, 'uid|conv'; its score is the record's `w` (never below the wall clock at the change, ms), the clear's version too. */
  member: string;
}

/**
 * Read receipts in the durable tier, written through (each raise, drop and setting is in
 * PostgreSQL once its call returns) and read back when Redis lacks a conversation or a setting.
 */
export interface ReadPositionsBacking {
  /** Max-merges positions (GREATEST). */
  savePositions(items: ReadonlyArray<{ conv: string; uid: string; seq: number }>): Promise<void>;
  deletePositions(uid: string, convs: readonly string[]): Promise<void>;
  loadPositions(convs: readonly string[]): Promise<Array<{ conv: string; uid: string; seq: number }>>;
  /** Returns the user's settings revision after this write (StoredSetting.rev). */
  saveSharing(uid: string, share: boolean): Promise<number>;
  /** The stored settings of those of `uids` that have one. */
  loadSharing(uids: readonly string[]): Promise<Map<string, StoredSetting>>;
  /** Returns the user's settings revision after this write (StoredSetting.rev). */
  saveMutedMentions(uid: string, on: boolean): Promise<number>;
  /** The stored mutedMentions settings of those of `uids` that have a settings row. */
  loadMutedMentions(uids: readonly string[]): Promise<Map<string, StoredSetting>>;
}

/**
 * A setting as PostgreSQL holds it, with the revision of the user's settings row: raised by
 * every write of the row, so of two writes the later one has the larger. Redis keeps it beside
 * the value and takes only a larger one (setting-text.ts).
 */
export interface StoredSetting {
  value: boolean;
  rev: number;
}
