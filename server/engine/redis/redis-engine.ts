import { Cluster, type Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import { LIMITS } from '../../../protocol/limits.js';
import type { Cursor, MessageEvent, Snapshot } from '../../../protocol/types.js';
import { DEFAULT_STORE_TIMEOUT_MS, quitWithin, type RedisTarget } from '../../redis-target.js';
import type { EngineAdmin } from '../admin.js';
import type { BadgeMarks } from '../badge-marks.js';
import type { DurableBacking, DurableStore, PersistedConversation, PersistedUser } from '../durable-backing.js';
import type {
  ApplyOptions,
  ClaimTerms,
  ConvInfo,
  Engine,
  EngineOptions,
  HeadExtra,
  JoinClaim,
  MembersChange,
  MembersStep,
  MemberTag,
  MessageRecord,
  RecordedMessage,
  Roster,
  StoredPull,
  StoredUserState,
  TopicAdd,
  UserOp,
  UserOpResult,
} from '../engine.js';
import { UNSEEN_EPOCH } from '../engine.js';
import { mergeOps } from '../merge-ops.js';
import { toConvState } from '../rules.js';
import { decodeEntries, decodeMemberTag, decodeRecord, decodeSnapshotText, decodeState, encodeMemberTag, encodeRecord } from '../state-text.js';
import { afterPartOfIt, OutcomeUnknownError, ofParts, type StoreError, StoreUnavailableError } from '../store-errors.js';
import { StoreHealth } from '../store-health.js';
import { clientAddress, clusterClient, singleClient } from './clients.js';
import { asArray, asNumber, asString, asStrings, type Reply } from './codec.js';
import { CommandGuard, guardCommands } from './command-guard.js';
import { convInfo } from './conv-info.js';
import { flushArgs } from './flush-call.js';
import { joinClaimOf } from './join-claims.js';
import {
  activityKey,
  convKey,
  convKeyHead,
  dirtyConvsKey,
  evictedConvMember,
  evictedKey,
  intactKey,
  mutedMentionsKey,
  readsKey,
  shardOf,
  threadsKey,
  topicsKey,
  type UserKeys,
  userChannel,
  userKeys,
} from './keys.js';
import { RedisAdmin } from './redis-admin.js';
import { RedisBadgeMarks } from './redis-badge-marks.js';
import { RedisDurableStore } from './redis-durable.js';
import { publishCommand, RedisNotifications } from './redis-notifications.js';
import { RedisReadPositions } from './redis-read-positions.js';
import { ClusterRuns, type RunTracker, type RunWaits, SingleRun } from './runs.js';
import { buildLibrary, defineScripts, ensureLibrary, type Library, type ScriptedCluster, type ScriptedRedis } from './scripts.js';
import { appendUserOps, mentionArg, opArgs } from './user-ops.js';
import { watchCluster, watchRedis } from './watch-redis.js';

/**
 * One Redis (`url`), a Redis Cluster (`cluster`: seed nodes) or the master Sentinels name
 * (`sentinel`), plus the engine options.
 * `prefix` (default `rp`) starts every key and channel; it lets several engines share one Redis,
 * e.g. in tests. `storeTimeoutMs` bounds every store call (STORE_TIMEOUT_MS); `health` hears of
 * each connection's state changes and of failed calls.
 */
export type RedisEngineOptions = EngineOptions &
  RedisTarget & {
    prefix?: string;
    storeTimeoutMs?: number;
    health?: StoreHealth;
    durable?: RedisDurableOptions;
    /** REDIS_WAIT_REPLICAS: every write waits for `count` replicas, up to `timeoutMs` (command-guard.ts). */
    waitReplicas?: { count: number; timeoutMs: number };
  };

/**
 * The durable tier behind this engine (DESIGN.md §10): every change marks what it changed dirty
 * in the same step, and a user or conversation missing from Redis is restored from `backing`
 * before the request that touched it applies.
 */
export interface RedisDurableOptions {
  backing: DurableBacking;
  /** How often (ms) a user's activity is told to the cold sweep's set, at most. */
  activityEveryMs: number;
  /** Hears of every user and conversation put back from the backing. */
  onRestore?: (kind: 'user' | 'conversation', count: number) => void;
}

const READY_TIMEOUT_MS = 1_000;
/** Conversations' `#`-fields; every other field of a conversation hash is a member. */
const CONV_FIELD = '#';
const DEFAULT_IDLE_SECONDS = 7 * 24 * 3600;

/**
 * The Redis engine. Each user step is ONE Lua script over keys sharing the user's hash tag
 * (records, totals, version, stream, snapshot, trim and the notification change together); each
 * conversation step is one script (or one command) over the conversation's one hash. No command
 * spans two hash tags, so the same engine runs on one Redis and on a Redis Cluster (ioredis
 * `Cluster`, which routes each command and script to the master of its slot).
 *
 * Epochs and the Redis run. A user's epoch (DESIGN.md §3) must change whenever the history behind
 * it may have changed. Redis can lose its last writes and keep the rest (with AOF `appendfsync
 * everysec` a crash loses up to a second): the epoch survives but the version goes back, and once
 * new writes reach a version a client already holds, a delta from that client's cursor would
 * continue a history it never saw. Redis loses writes only across a restart (or a failover to
 * another server), i.e. under a new `run_id`. So each user's meta stores the run id it was last
 * used under, and every user script gets the current run id of the server holding the user's
 * keys: on a mismatch it starts a new epoch. Versions continue from what Redis kept; the stream
 * and snapshot stay (they match the state Redis kept). A cursor of the old epoch gets a snapshot.
 * The price: every Redis restart, even one that lost nothing, costs each client one snapshot. On
 * a cluster that holds per master.
 *
 * Which run id a script carries, and when its reply is trusted, is `RunTracker`'s job (runs.ts):
 * a user script goes out only once the run id of the connection it goes out on is known, and a
 * reply that may have been resent to another run is rejected (its outcome is unknown).
 */
export class RedisEngine implements Engine {
  readonly kind = 'redis' as const;
  readonly notifications: RedisNotifications;
  readonly readPositions: RedisReadPositions;
  private readonly prefix: string;
  private readonly publish: 'PUBLISH' | 'SPUBLISH';
  private readonly idleSeconds: number;
  private toolbox: RedisAdmin | undefined;
  private durableSide: RedisDurableStore | undefined;
  private marks: RedisBadgeMarks | undefined;
  private readonly cluster: boolean;

  private constructor(
    private readonly client: ScriptedRedis | ScriptedCluster,
    private readonly runs: RunTracker,
    private readonly options: RedisEngineOptions,
    private readonly library: Library,
  ) {
    this.prefix = options.prefix ?? 'rp';
    this.publish = publishCommand(options);
    this.idleSeconds = options.streamIdleSeconds ?? DEFAULT_IDLE_SECONDS;
    this.cluster = client instanceof Cluster;
    const receiptsBacking = options.durable?.backing.readPositions;
    this.readPositions = new RedisReadPositions(
      client,
      this.prefix,
      this.publish,
      receiptsBacking ? { backing: receiptsBacking, restoreConversations: (convs) => this.restoreConversations(convs) } : undefined,
    );
    this.notifications = new RedisNotifications(options, this.prefix, {
      health: options.health ?? new StoreHealth(),
      storeTimeoutMs: options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS,
    });
    // Without a listener ioredis prints every failed reconnect (and a Cluster's 'error' event
    // would throw); callers learn of an outage from ready() and from failing commands instead.
    client.on('error', () => undefined);
  }

  /** Connects and loads the scripts; rejects when Redis does not answer or a script is invalid. */
  static async create(options: RedisEngineOptions): Promise<RedisEngine> {
    const timeoutMs = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    const health = options.health ?? new StoreHealth(undefined, undefined, timeoutMs);
    // Auto-pipelining: the per-user scripts of one ingest batch go out in one round trip (on a
    // Cluster: one per master). No offline queue on one Redis: a command either goes out over a
    // ready connection (CommandGuard waits for one, bounded) or fails as not sent, never queued to
    // be sent after its caller was told it failed. (A Cluster's node connections always queue.)
    const client =
      options.cluster === undefined
        ? singleClient(options, { storeTimeoutMs: timeoutMs, extra: { enableAutoPipelining: true, lazyConnect: true, enableOfflineQueue: false } })
        : clusterClient(
            options,
            { storeTimeoutMs: timeoutMs },
            {
              enableAutoPipelining: true,
              lazyConnect: true,
              // A restarted master answers CLUSTERDOWN for its first 2 s (Redis lets the cluster
              // reconfigure it before it takes writes): retry for 16 x 200 ms rather than the
              // default 1.6 s, so a quick restart delays commands (up to the store timeout) instead
              // of failing them.
              retryDelayOnClusterDown: 200,
            },
          );
    const address = client instanceof Cluster ? 'cluster' : clientAddress(options, client);
    const whole = `engine@${address}`;
    if (client instanceof Cluster) watchCluster(health, 'engine', client);
    else watchRedis(health, whole, client);
    // connect() rejects with "Connection is closed." once ioredis gives up; the socket's own
    // error (ECONNREFUSED, ENOTFOUND...) came as an event before it and says why.
    let socketError: Error | undefined;
    const swallow = (err: Error): void => {
      socketError = err;
    };
    client.on('error', swallow);
    try {
      const library = buildLibrary();
      await client.connect().catch((err: unknown) => {
        const cause = socketError ?? err;
        const reason = cause instanceof Error ? cause.message : String(cause);
        throw new StoreUnavailableError('not_ready', `cannot connect to Redis: ${reason}`, { cause });
      });
      const waits: RunWaits = { deadline: () => health.waitDeadline(whole, timeoutMs), failed: (err) => health.failed(err) };
      // On a cluster, the library is loaded on each new master connection before user scripts use it.
      const runs = client instanceof Cluster ? new ClusterRuns(client, (node) => ensureLibrary(node, library), waits) : new SingleRun(client, address, waits);
      // A call that finds its function missing reloads the library wherever it is missing.
      const reload = async (): Promise<void> => {
        await Promise.all(runs.masters().map((node) => ensureLibrary(node, library)));
      };
      await defineScripts(client, runs.masters(), library, reload);
      // Every data command goes through one guard: bounded waits, typed errors, health.
      const guard = new CommandGuard(runs, waits, health, (address) => `engine@${address}`, timeoutMs, options.waitReplicas);
      const engine = new RedisEngine(guardCommands(client as ScriptedRedis | ScriptedCluster, guard), runs, { ...options, health }, library);
      // Fails fast when INFO is not allowed (renamed, or denied by an ACL).
      await runs.learnAll(Date.now() + READY_TIMEOUT_MS * 10);
      return engine;
    } catch (err) {
      client.disconnect();
      throw err;
    } finally {
      client.off('error', swallow);
    }
  }

  async changeMembers(conv: string, change: MembersChange): Promise<MembersStep> {
    const add = [...new Set(change.add)];
    const addSet = new Set(add);
    const remove = [...new Set(change.remove)].filter((uid) => !addSet.has(uid));
    const given = change.category !== undefined;
    const key = convKey(this.prefix, conv);
    const call = (check: boolean): Promise<Reply> =>
      this.client.convMembers(
        key,
        dirtyConvsKey(this.prefix, shardOf(key, this.cluster)),
        change.threshold,
        given ? '1' : '0',
        change.category ?? 'default',
        add.length,
        this.durable ? Date.now() : '',
        check ? '1' : '0',
        conv,
        change.sync ?? '',
        change.sync !== undefined ? (change.syncFrom ?? '') : '',
        ...add,
        ...remove,
      );
    // Durable: a conversation Redis lacks is put back before the change, or its generation would
    // start over below what its members' records already hold.
    let answer = await call(this.durable !== undefined);
    if (answer === ABSENT) answer = await call((await this.restoreConversations([conv])).has(conv));
    if (answer === ABSENT) throw new StoreUnavailableError('restore', `conversation ${conv} vanished while it was being restored; retry`);
    const reply = asArray(answer);
    const info: ConvInfo = {
      conv,
      maxSeq: asNumber(reply[0]),
      large: asNumber(reply[1]) === 1,
      category: asString(reply[2]),
      memberCount: asNumber(reply[3]),
      gen: asNumber(reply[4]),
      ...(reply[7] != null ? { at: Number(reply[7]) } : {}),
    };
    const flat = asStrings(reply[6]);
    const joins: MemberTag[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) joins.push(decodeMemberTag(flat[i] ?? '', flat[i + 1] ?? ''));
    const ahead = reply[9] == null ? [] : asString(reply[9]).split(',').map(Number);
    return {
      info,
      joins,
      leaves: [...new Set(asStrings(reply[8]))],
      rewrite: asNumber(reply[5]) === 1,
      fromGen: asNumber(reply[10]),
      ...(asNumber(reply[11]) === 1 ? { behind: true as const } : {}),
      ...(ahead.length > 0 ? { nocount: ahead } : {}),
    };
  }

  async roster(conv: string): Promise<Roster | null> {
    let all = await this.client.hgetall(convKey(this.prefix, conv));
    if (all[`${CONV_FIELD}s`] === undefined && (await this.restoreConversations([conv])).has(conv)) all = await this.client.hgetall(convKey(this.prefix, conv));
    if (all[`${CONV_FIELD}s`] === undefined) return null;
    const members: MemberTag[] = [];
    for (const [field, value] of Object.entries(all)) if (!field.startsWith(CONV_FIELD)) members.push(decodeMemberTag(field, value));
    const info = convInfo(conv, [all['#s'], all['#l'], all['#c'], all['#g'], all['#n']]);
    return { info: all['#a'] === undefined ? info : { ...info, at: Number(all['#a']) }, members };
  }

  async joinTag(conv: string, uid: string): Promise<MemberTag | null> {
    // The member's field of the conversation's hash (uids never start with CONV_FIELD), with its
    // head: a conversation Redis lost or the cold sweep evicted is put back first, as every other
    // read of one is (a thread's follow asks whether the user is a member: "not" would be wrong).
    const read = (): Promise<(string | null)[]> => this.client.hmget(convKey(this.prefix, conv), `${CONV_FIELD}s`, uid);
    let [head, text] = await read();
    if (head == null && (await this.restoreConversations([conv])).has(conv)) [head, text] = await read();
    return text == null ? null : decodeMemberTag(uid, text);
  }

  async finishRewrite(conv: string, gen: number): Promise<void> {
    await this.client.convFinishRewrite(convKey(this.prefix, conv), gen);
  }

  async getConversation(conv: string): Promise<ConvInfo | null> {
    const read = (): Promise<(string | null)[]> => this.client.hmget(convKey(this.prefix, conv), '#s', '#l', '#c', '#g', '#n');
    let meta = await read();
    if (meta[0] == null && (await this.restoreConversations([conv])).has(conv)) meta = await read();
    return meta[0] == null ? null : convInfo(conv, meta);
  }

  async addTopic(conv: string, topic: string, cap: number): Promise<TopicAdd> {
    const call = (): Promise<Reply> => this.client.topicAdd(convKey(this.prefix, conv), topicsKey(this.prefix, conv), topic, cap);
    let answer = await call();
    // Durable: the conversation (and its registry) put back first, or the cap would count an empty registry.
    if (answer === ABSENT && this.durable && (await this.restoreConversations([conv])).has(conv)) answer = await call();
    if (answer === ABSENT) return 'unknown';
    const outcome = asString(answer) as TopicAdd;
    // Written through before the caller creates the child: a registry Redis then drops with the
    // conversation comes back whole. A crash before this write leaves the topic not 'ready', so
    // the retry comes here again.
    if ((outcome === 'added' || outcome === 'present') && this.durable?.backing.topics) await this.durable.backing.topics.save(conv, topic);
    return outcome;
  }

  async topicReady(conv: string, topic: string): Promise<void> {
    await this.client.topicReady(convKey(this.prefix, conv), topicsKey(this.prefix, conv), topic);
  }

  topics(conv: string): Promise<string[]> {
    return this.registry(conv, topicsKey(this.prefix, conv));
  }

  async addThread(conv: string, root: number): Promise<boolean> {
    const call = (saved: '0' | '1'): Promise<Reply> => this.client.threadAdd(convKey(this.prefix, conv), threadsKey(this.prefix, conv), root, saved);
    let answer = await call('0');
    if (answer === ABSENT && this.durable && (await this.restoreConversations([conv])).has(conv)) answer = await call('0');
    if (answer === ABSENT) return false;
    const backing = this.durable?.backing.threads;
    // Written through before the caller can make the child (as addTopic): a registry Redis then
    // drops with the conversation comes back whole. A crash before this write leaves the root
    // '0', so the retry comes here again; once PostgreSQL holds it, '1' spares the next replies
    // the write (a conversation gone since: its restore puts the root back as '1').
    if (asString(answer) === 'added' && backing) {
      await backing.save(conv, String(root));
      await call('1');
    }
    return true;
  }

  async threads(conv: string): Promise<number[]> {
    return (await this.registry(conv, threadsKey(this.prefix, conv))).map(Number);
  }

  /** A registry (topics' or threads'), read with the conversation's existence: one Redis lost is put back first, registry included. */
  private async registry(conv: string, key: string): Promise<string[]> {
    const call = (): Promise<Reply> => this.client.registryList(convKey(this.prefix, conv), key);
    let answer = await call();
    if (answer === ABSENT && this.durable && (await this.restoreConversations([conv])).has(conv)) answer = await call();
    return answer === ABSENT ? [] : asStrings(answer);
  }

  async dropThreads(conv: string): Promise<void> {
    // PostgreSQL first: a restore in between would otherwise bring the rows back.
    await this.durable?.backing.threads?.drop(conv);
    await this.client.del(threadsKey(this.prefix, conv));
  }

  async dropTopics(conv: string): Promise<void> {
    // PostgreSQL first: a restore in between would otherwise bring the rows back.
    await this.durable?.backing.topics?.drop(conv);
    await this.client.del(topicsKey(this.prefix, conv));
  }

  async missingConversations(convs: readonly string[]): Promise<string[]> {
    const distinct = [...new Set(convs)];
    // One Redis: one EXISTS over all the keys answers the common case (all known) with one
    // command instead of one per conversation (a 16-message POST made 16 commands, each with its
    // own Command, promise and reply). EXISTS only counts, so a shortfall asks key by key. On a
    // cluster the keys span slots, which one EXISTS may not.
    if (!(this.client instanceof Cluster) && distinct.length > 1) {
      const found = await this.client.exists(...distinct.map((conv) => convKey(this.prefix, conv)));
      if (found === distinct.length) return [];
    }
    const found = await Promise.all(distinct.map((conv) => this.client.exists(convKey(this.prefix, conv))));
    const missing = new Set(distinct.filter((_, i) => found[i] === 0));
    if (missing.size > 0 && this.durable) for (const conv of await this.restoreConversations([...missing])) missing.delete(conv);
    return convs.filter((conv) => missing.has(conv));
  }

  async recordMessages(items: readonly MessageRecord[], at?: number): Promise<(RecordedMessage | null)[]> {
    const out = new Array<RecordedMessage | null>(items.length).fill(null);
    await this.recordSome(items, [...items.keys()], at, out);
    if (this.durable) {
      // Conversations Redis lacks but PostgreSQL knows are put back, then recorded.
      const unknown = [...items.keys()].filter((i) => out[i] === null);
      if (unknown.length > 0) {
        const restored = await this.restoreConversations(unknown.map((i) => (items[i] as MessageRecord).conv));
        const again = unknown.filter((i) => restored.has((items[i] as MessageRecord).conv));
        if (again.length > 0) await this.recordSome(items, again, at, out);
      }
    }
    return out;
  }

  /**
   * Engine.recordAndApply. On one Redis a flush is ONE call (ingest_flush.lua: the conversation
   * steps, the ops mergeOps derives, the user steps) when it is small enough for one script
   * (MAX_SCRIPT_ARGS, and at most MAX_FLUSH_OPS user ops, which the script checks before applying
   * any); otherwise, and on a cluster (a user's keys may live on another master), the two steps.
   * Durable: conversations Redis lacks, and users it lacks, are restored and done as two steps.
   */
  async recordAndApply(
    items: readonly MessageRecord[],
    messages: readonly MessageEvent[],
    at: number,
  ): Promise<{ recorded: (RecordedMessage | null)[]; userOps: number }> {
    const args: (string | number)[] = [];
    flushArgs(items, messages, args);
    // Issue 43: ingest_flush.lua does not derive non-counting seqs (rare: edits, reactions,
    // recalls); a batch with any goes as the two steps, whose ops mergeOps makes.
    if (this.cluster || items.length === 0 || args.length > MAX_SCRIPT_ARGS || messages.some(countsLess)) {
      return this.twoSteps(items, messages, at);
    }
    const k = convKey(this.prefix, (items[0] as MessageRecord).conv);
    const reply = asArray(
      await this.runs.userScript(k, (runId) =>
        this.client.ingestFlush(
          k,
          this.prefix,
          at.toFixed(3),
          this.publish,
          this.durable ? String(Date.now()) : '',
          runId,
          this.options.snapshotEvery,
          this.options.streamMaxLen,
          LIMITS.mentionSeqsPerConversation,
          this.idleSeconds,
          Math.floor(Date.now() / 1000),
          this.durable?.activityEveryMs ?? 0,
          this.durable ? '1' : '0',
          MAX_FLUSH_OPS,
          this.hookNow(),
          ...args,
        ),
      ),
    );
    // ingest_flush.lua's flat reply: applied, user ops, absent users, five values per
    // conversation, the absent uids, then (only when the ops must be derived here) each
    // conversation's listed uids, then each one's `ahead` (mentions of seqs recalled already).
    const applied = asNumber(reply[0]) === 1;
    const userOps = asNumber(reply[1]);
    const absentCount = asNumber(reply[2]);
    const listedAt = 3 + 5 * items.length + absentCount;
    const recorded = items.map((item, i): RecordedMessage | null => {
      const at5 = 3 + 5 * i;
      if (reply[at5] === null) return null;
      const info = convInfo(item.conv, reply.slice(at5, at5 + 5));
      const listed = reply.length > listedAt ? asStrings(reply[listedAt + i]) : [];
      const members = info.large ? listed : listed.filter((f) => !f.startsWith(CONV_FIELD));
      const ahead = reply.length > listedAt ? uidSeqLists(reply[listedAt + items.length + i]) : undefined;
      return { info, members, ...(ahead ? { ahead } : {}) };
    });
    const absent = new Set(asStrings(reply.slice(3 + 5 * items.length, listedAt)));
    const unknown = this.durable ? items.filter((_, i) => recorded[i] === null) : [];
    if (applied && absent.size === 0 && unknown.length === 0) return { recorded, userOps };
    // The members were listed (the reply has them in these two cases): the ops derived here.
    const byConv = new Map<string, RecordedMessage>();
    items.forEach((item, i) => {
      const r = recorded[i];
      if (r) byConv.set(item.conv, r);
    });
    const ops = !applied || absent.size > 0 ? mergeOps(messages, byConv) : [];
    if (!applied) {
      // Too many user ops for one script: the heads moved, the user steps go in chunks.
      await this.applyUserOps(ops, { at, results: false }).catch((err: unknown) => {
        throw afterPartOfIt(err);
      });
      return { recorded, userOps: ops.length };
    }
    // Durable: what Redis lacked is restored and applied now, after the rest landed.
    try {
      if (absent.size > 0)
        await this.applyUserOps(
          ops.filter((op) => absent.has(op.uid)),
          { at, results: false },
        );
      if (unknown.length > 0) {
        const again = await this.twoSteps(
          unknown,
          messages.filter((m) => unknown.some((u) => u.conv === m.conv)),
          at,
        );
        items.forEach((item, i) => {
          const j = unknown.indexOf(item);
          if (j >= 0) recorded[i] = again.recorded[j] ?? null;
        });
        return { recorded, userOps: userOps + again.userOps };
      }
    } catch (err) {
      throw afterPartOfIt(err);
    }
    return { recorded, userOps };
  }

  /** recordMessages, then the message ops mergeOps derives from what it read: what Ingest does without recordAndApply. */
  private async twoSteps(
    items: readonly MessageRecord[],
    messages: readonly MessageEvent[],
    at: number,
  ): Promise<{ recorded: (RecordedMessage | null)[]; userOps: number }> {
    const recorded = await this.recordMessages(items, at);
    const byConv = new Map<string, RecordedMessage>();
    items.forEach((item, i) => {
      const r = recorded[i];
      if (r) byConv.set(item.conv, r);
    });
    const ops = mergeOps(messages, byConv);
    await this.applyUserOps(ops, { at, results: false }).catch((err: unknown) => {
      throw afterPartOfIt(err);
    });
    return { recorded, userOps: ops.length };
  }

  private async recordSome(
    items: readonly MessageRecord[],
    indexes: readonly number[],
    at: number | undefined,
    out: (RecordedMessage | null)[],
  ): Promise<void> {
    const atArg = at === undefined ? '' : at.toFixed(3);
    const durableNow = this.durable ? String(Date.now()) : '';
    await this.perServer(
      indexes.map((i) => ({ key: convKey(this.prefix, (items[i] as MessageRecord).conv), index: i })),
      (i) => 6 + (items[i] as MessageRecord).candidates.length,
      async (group, cluster) => {
        const args: (string | number)[] = [this.prefix, atArg, this.publish, cluster ? '1' : '0', durableNow, this.hookNow()];
        for (const { index, key } of group) {
          const item = items[index] as MessageRecord;
          // 'N+': the conversation's last activity, @all seqs, non-counting seqs and mentions follow the count (conv_record.lua).
          if (item.at === undefined && item.mentionAll === undefined && item.nocount === undefined && item.mentioned === undefined)
            args.push(item.conv, shardOf(key, cluster), item.seq, item.candidates.length, ...item.candidates);
          else
            args.push(
              item.conv,
              shardOf(key, cluster),
              item.seq,
              `${item.candidates.length}+`,
              item.at ?? '',
              mentionArg(item.mentionAll ?? []),
              (item.nocount ?? []).join(','),
              (item.mentioned ?? []).map(([uid, seq]) => `${uid}=${seq}`).join(' '),
              ...item.candidates,
            );
        }
        const reply = asArray(await this.client.convRecord((group[0] as Grouped).key, ...args));
        return reply.map((part, j) => {
          const index = (group[j] as Grouped).index;
          if (part === 0) return { index, done: true };
          if (part === MOVED) return { index, done: false };
          out[index] = recordedOf((items[index] as MessageRecord).conv, part);
          return { index, done: true };
        });
      },
    );
  }

  async claimJoins(conv: string, uids: readonly string[], terms: ClaimTerms): Promise<JoinClaim[]> {
    // One step per user (its own hash tag, so any master of a cluster), pipelined by auto-pipelining.
    const claim = async (uid: string, check: boolean): Promise<JoinClaim | null> => {
      const k = userKeys(this.prefix, uid);
      const reply = await this.client.userClaim(k.meta, k.records, k.claims, conv, terms.cap, terms.holdMs, check ? '1' : '0', terms.within ?? '');
      return reply === ABSENT ? null : joinClaimOf(uid, reply);
    };
    const out = await Promise.all(uids.map((uid) => claim(uid, this.durable !== undefined)));
    // Durable: a user Redis lacks (cold, or lost) is counted from PostgreSQL's rows, restored
    // first; counted as new it would pass the cap with every conversation it already has.
    for (let round = 0; out.includes(null); round++) {
      const missing = uids.filter((_, i) => out[i] === null);
      if (round >= 2) throw new StoreUnavailableError('restore', `users vanished again while being restored (${missing.slice(0, 3).join(', ')}); retry`);
      const fresh = new Set<string>();
      await this.restoreUsers(missing, fresh);
      await Promise.all(
        uids.map(async (uid, i) => {
          if (out[i] === null) out[i] = await claim(uid, !fresh.has(uid));
        }),
      );
    }
    return out as JoinClaim[];
  }

  async heads(convs: readonly string[]): Promise<Map<string, number>> {
    // One HGET per conversation (each its own hash tag), pipelined by auto-pipelining.
    const replies = await Promise.all(convs.map((conv) => this.client.hget(convKey(this.prefix, conv), '#s')));
    if (this.durable && replies.some((r) => r == null)) {
      const restored = await this.restoreConversations(convs.filter((_, i) => replies[i] == null));
      await Promise.all(
        convs.map(async (conv, i) => {
          if (replies[i] == null && restored.has(conv)) replies[i] = await this.client.hget(convKey(this.prefix, conv), '#s');
        }),
      );
    }
    const out = new Map<string, number>();
    replies.forEach((maxSeq, i) => {
      const conv = convs[i];
      if (conv !== undefined && maxSeq != null) out.set(conv, Number(maxSeq));
    });
    return out;
  }

  async headExtras(convs: readonly string[]): Promise<Map<string, HeadExtra>> {
    // One HMGET per conversation (each its own hash tag), pipelined by auto-pipelining. The head
    // '#s' tells a conversation Redis lacks (every one has it) from one with no activity: with the
    // durable tier it is restored here, as heads() does, not left to a heads() read run before
    // this one (a caller may run both at once: a pull did, and lost `at` after a wipe).
    const read = (conv: string): Promise<(string | null)[]> => this.client.hmget(convKey(this.prefix, conv), '#s', '#a', '#@', '#N');
    const replies = await Promise.all(convs.map(read));
    if (this.durable && replies.some(([head]) => head == null)) {
      const restored = await this.restoreConversations(convs.filter((_, i) => replies[i]?.[0] == null));
      await Promise.all(
        convs.map(async (conv, i) => {
          if (replies[i]?.[0] == null && restored.has(conv)) replies[i] = await read(conv);
        }),
      );
    }
    const out = new Map<string, HeadExtra>();
    const seqs = (text: string | null | undefined): number[] => (text == null || text === '' ? [] : text.split(',').map(Number));
    replies.forEach(([, at, all, nocount], i) => {
      const conv = convs[i];
      if (conv === undefined || (at == null && (all == null || all === '') && (nocount == null || nocount === ''))) return;
      out.set(conv, { at: at == null ? 0 : Number(at), mentionAll: seqs(all), nocount: seqs(nocount) });
    });
    return out;
  }

  async applyUserOps(ops: readonly UserOp[], options: ApplyOptions = {}): Promise<UserOpResult[]> {
    // Each user's ops in order, in one step; the users of one server (all of them on one Redis)
    // in one script call.
    const byUser = new Map<string, number[]>();
    ops.forEach((op, i) => {
      const list = byUser.get(op.uid);
      if (list) list.push(i);
      else byUser.set(op.uid, [i]);
    });
    const withResults = options.results !== false;
    const results = new Array<UserOpResult>(withResults ? ops.length : 0);
    // Durable: users Redis lacks come back 'absent' with nothing applied; they are restored from
    // PostgreSQL and their ops sent again. `fresh`: users PostgreSQL does not know either, whose
    // ops then apply to an empty state.
    const fresh = new Set<string>();
    let users = [...byUser];
    for (let round = 0; users.length > 0; round++) {
      const absent = await this.applyRound(ops, users, options, results, fresh);
      if (absent.size === 0) break;
      // Other users of this call may have been applied already: a failure now leaves a half-made change.
      const partial = users.length > absent.size;
      const fail = (message: string, cause?: unknown): StoreError =>
        partial ? new OutcomeUnknownError('restore', message, { cause }) : new StoreUnavailableError('restore', message, { cause });
      if (round >= 2) throw fail(`users vanished again while being restored (${[...absent].slice(0, 3).join(', ')}); retry`);
      await this.restoreUsers([...absent], fresh).catch((err: unknown) => {
        throw fail(err instanceof Error ? err.message : String(err), err);
      });
      users = users.filter(([uid]) => absent.has(uid));
    }
    return results;
  }

  /** One call per server for `users`' ops; returns the users reported absent (nothing of theirs applied). */
  private async applyRound(
    ops: readonly UserOp[],
    users: ReadonlyArray<[string, number[]]>,
    options: ApplyOptions,
    results: UserOpResult[],
    fresh: ReadonlySet<string>,
  ): Promise<Set<string>> {
    const withResults = options.results !== false;
    const at = options.at === undefined ? '' : options.at.toFixed(3);
    const absent = new Set<string>();
    await this.perServer(
      users.map(([uid], i) => ({ key: userKeys(this.prefix, uid).meta, index: i })),
      (i) => 4 + (users[i] as [string, number[]])[1].reduce((n, opIndex) => n + opArgs(ops[opIndex] as UserOp), 0),
      async (group, cluster) => {
        const first = group[0] as Grouped;
        const reply = asArray(
          await this.runs.userScript(first.key, (runId) => {
            const args: (string | number)[] = [
              runId,
              this.prefix,
              this.options.snapshotEvery,
              this.options.streamMaxLen,
              LIMITS.mentionSeqsPerConversation,
              this.idleSeconds,
              this.publish,
              at,
              Math.floor(Date.now() / 1000),
              cluster ? '1' : '0',
              withResults ? '1' : '0',
              this.durable ? Date.now() : '',
              this.durable?.activityEveryMs ?? 0,
              this.hookNow(),
            ];
            for (const { index, key } of group) {
              const [uid, indexes] = users[index] as [string, number[]];
              args.push(uid, indexes.length, shardOf(key, cluster), this.durable && !fresh.has(uid) ? '1' : '0');
              appendUserOps(
                args,
                indexes.map((i) => ops[i] as UserOp),
              );
            }
            return this.client.userApply(first.key, ...args);
          }),
        );
        const done: { index: number; done: boolean }[] = [];
        let r = 0;
        for (const { index } of group) {
          if (r >= reply.length || reply[r] === MOVED) {
            done.push({ index, done: false });
            continue;
          }
          const epoch = asString(reply[r++]);
          if (epoch === ABSENT) {
            absent.add((users[index] as [string, number[]])[0]);
            done.push({ index, done: true });
            continue;
          }
          if (!withResults) {
            done.push({ index, done: true });
            continue;
          }
          for (const opIndex of (users[index] as [string, number[]])[1]) {
            results[opIndex] = {
              changed: asNumber(reply[r]) === 1,
              member: asNumber(reply[r + 1]) === 1,
              epoch,
              version: asNumber(reply[r + 2]),
              state: decodeState(asString(reply[r + 3])),
            };
            r += 4;
          }
          done.push({ index, done: true });
        }
        return done;
      },
    );
    return absent;
  }

  /**
   * Puts back users Redis lacks from the durable backing (each atomically, under a new epoch;
   * one that another process restored or created meanwhile is left as Redis holds it). Users the
   * backing does not know, or knows only as non-members, are added to `fresh`.
   */
  private async restoreUsers(uids: readonly string[], fresh: Set<string>): Promise<void> {
    const durable = this.durable;
    if (!durable) return;
    let pending = uids;
    let restored = 0;
    for (let attempt = 1; pending.length > 0; attempt++) {
      if (attempt > RESTORE_ATTEMPTS) throw restoreRaced('users', pending);
      // Seen before PostgreSQL is read: an eviction in between changes it (evictedSince in lib/user.lua).
      const stamps = await this.evictedStamps(pending.map((uid) => ({ key: userKeys(this.prefix, uid).meta, member: uid })));
      const loaded = await durable.backing.loadUsers(pending).catch(async (err: unknown) => {
        // PostgreSQL down: a user missing from an intact Redis that the cold sweep did not evict
        // is new (nothing to restore); any other would lose what PostgreSQL holds, so it waits.
        const unknown = await this.newWhileBackingDown(
          pending.map((uid) => userKeys(this.prefix, uid).meta),
          pending,
        );
        if (unknown.length < pending.length) throw backingDown(err);
        return new Map<string, PersistedUser>();
      });
      const again: string[] = [];
      await Promise.all(
        pending.map(async (uid, i) => {
          const persisted = loaded.get(uid);
          if (!persisted || persisted.records.length === 0) {
            fresh.add(uid);
            return;
          }
          const k = userKeys(this.prefix, uid);
          const reply = await this.runs.userScript(k.meta, (runId) =>
            this.client.userRestore(
              ...userApplyKeys(k),
              nanoid(12),
              runId,
              this.idleSeconds,
              userChannel(this.prefix, uid),
              this.publish,
              persisted.w,
              Date.now(),
              activityKey(this.prefix, shardOf(k.meta, this.cluster)),
              uid,
              evictedKey(this.prefix, shardOf(k.meta, this.cluster)),
              stamps[i] ?? '',
              ...persisted.records.flatMap((rec) => [rec.conv, encodeRecord(rec)]),
            ),
          );
          const outcome = asNumber(reply);
          if (outcome === 2) fresh.add(uid);
          if (outcome === 1) restored++;
          if (outcome === STALE_RESTORE) again.push(uid);
        }),
      );
      pending = again;
    }
    if (restored > 0) durable.onRestore?.('user', restored);
  }

  /** Puts back conversations Redis lacks from the backing; returns those Redis holds now. */
  private async restoreConversations(convs: readonly string[]): Promise<Set<string>> {
    const durable = this.durable;
    const present = new Set<string>();
    if (!durable) return present;
    let pending = [...new Set(convs)];
    let restored = 0;
    for (let attempt = 1; pending.length > 0; attempt++) {
      if (attempt > RESTORE_ATTEMPTS) throw restoreRaced('conversations', pending);
      const stamps = await this.evictedStamps(pending.map((conv) => ({ key: convKey(this.prefix, conv), member: evictedConvMember(conv) })));
      const stampOf = new Map(pending.map((conv, i) => [conv, stamps[i] ?? '']));
      const asked = pending;
      const none = new Map<string, string[]>();
      const [loaded, registers, topicSets, threadSets] = await Promise.all([
        durable.backing.loadConversations(asked),
        this.readPositions.registersToRestore(asked),
        durable.backing.topics ? durable.backing.topics.load(asked) : none,
        durable.backing.threads ? durable.backing.threads.load(asked) : none,
      ]).catch(async (err: unknown) => {
        const unknown = await this.newWhileBackingDown(
          asked.map((conv) => convKey(this.prefix, conv)),
          asked.map((conv) => evictedConvMember(conv)),
        );
        if (unknown.length < asked.length) throw backingDown(err);
        return [new Map<string, PersistedConversation>(), new Map<string, Array<[string, number]>>(), none, none] as const;
      });
      const again: string[] = [];
      await Promise.all(
        [...loaded].map(async ([conv, c]) => {
          const key = convKey(this.prefix, conv);
          const members = new Set(c.members.map((m) => m.uid));
          const positions = (registers.get(conv) ?? []).filter(([uid]) => members.has(uid));
          const topics = topicSets.get(conv) ?? [];
          const roots = threadSets.get(conv) ?? [];
          const reply = await this.client.convRestore(
            key,
            evictedKey(this.prefix, shardOf(key, this.cluster)),
            readsKey(this.prefix, conv),
            topicsKey(this.prefix, conv),
            threadsKey(this.prefix, conv),
            c.maxSeq,
            c.large ? '1' : '0',
            c.category,
            c.gen,
            c.rewriteGen ?? '',
            evictedConvMember(conv),
            stampOf.get(conv) ?? '',
            c.at ?? '',
            mentionArg(c.mentionAll ?? []),
            c.largeFrom ?? 0,
            (c.nocount ?? []).join(','),
            c.parentGen ?? 0,
            positions.length,
            ...positions.flat(),
            topics.length,
            ...topics,
            roots.length,
            ...roots,
            ...c.members.flatMap((m) => [m.uid, encodeMemberTag(m)]),
          );
          const outcome = asNumber(reply);
          if (outcome === STALE_RESTORE) {
            again.push(conv);
            return;
          }
          if (outcome === 1) restored++;
          present.add(conv);
        }),
      );
      pending = again;
    }
    if (restored > 0) durable.onRestore?.('conversation', restored);
    return present;
  }

  /** Each key's stamp in its slot's evicted set ('' when not there), read before a restore reads PostgreSQL. */
  private evictedStamps(items: ReadonlyArray<{ key: string; member: string }>): Promise<string[]> {
    return Promise.all(items.map(async ({ key, member }) => (await this.client.zscore(evictedKey(this.prefix, shardOf(key, this.cluster)), member)) ?? ''));
  }

  /** Which of `keys` (each with its member of the evicted set: a uid, or evictedConvMember) are new: their shard is intact and they were not evicted. */
  private async newWhileBackingDown(keys: readonly string[], members: readonly string[]): Promise<string[]> {
    const answers = await Promise.all(
      keys.map(async (key, i) => {
        const shard = shardOf(key, this.cluster);
        const [intact, evicted] = await Promise.all([
          this.client.exists(intactKey(this.prefix, shard)),
          this.client.zscore(evictedKey(this.prefix, shard), members[i] ?? ''),
        ]);
        return intact === 1 && evicted === null;
      }),
    );
    return keys.filter((_, i) => answers[i]);
  }
  /** Durable: a read of a user Redis lacks restores it first, then reads again. */
  private async readUser<T extends { epoch: string }>(uid: string, read: () => Promise<T>): Promise<T> {
    const first = await read();
    if (!this.durable || first.epoch !== UNSEEN_EPOCH) return first;
    const fresh = new Set<string>();
    await this.restoreUsers([uid], fresh);
    return fresh.has(uid) ? first : read();
  }

  pull(uid: string, since: Cursor | null, limit: number): Promise<StoredPull> {
    return this.readUser(uid, () => this.pullOnce(uid, since, limit));
  }

  private async pullOnce(uid: string, since: Cursor | null, limit: number): Promise<StoredPull> {
    const reply = asArray(
      await this.userScript(uid, (runId, k) =>
        this.client.pull(
          ...userApplyKeys(k),
          mutedMentionsKey(this.prefix, uid),
          runId,
          since ? since.epoch : '-',
          since?.version ?? 0,
          Math.max(0, Math.floor(limit)),
          this.options.snapshotEvery,
          this.options.streamMaxLen,
          this.idleSeconds,
          this.durable ? activityKey(this.prefix, shardOf(k.meta, this.cluster)) : '',
          uid,
          Date.now(),
          this.durable?.activityEveryMs ?? 0,
          this.headsInStep(),
        ),
      ),
    );
    const version = asNumber(reply[1]);
    const texts = asStrings(reply[6]);
    const reset = asNumber(reply[3]) === 1;
    let snapshot: Snapshot | undefined;
    if (reset) snapshot = { v: asNumber(reply[4]), convs: decodeSnapshotText(asString(reply[5])) };
    const from = version - texts.length;
    return {
      epoch: asString(reply[0]),
      ...(snapshot ? { snapshot } : {}),
      entries: decodeEntries(texts, from + 1),
      version,
      more: asNumber(reply[2]) === 1,
      largeConvs: asStrings(reply[7]),
      ...withHeads(reply[8]),
      ...this.mutedMentionsOf(reply[9]),
    };
  }

  /**
   * What pull.lua and user_state.lua need to read the heads of a user's read-diffused
   * conversations in their own step: the conversation key head on one Redis, '' on a Cluster
   * (the conversations' keys are on other masters; heads() reads them).
   */
  private headsInStep(): string {
    return this.cluster ? '' : convKeyHead(this.prefix);
  }

  position(uid: string): Promise<Cursor> {
    return this.readUser(uid, async () => {
      const reply = asArray(await this.userScript(uid, (runId, k) => this.client.position(k.meta, runId)));
      return { epoch: asString(reply[0]), version: asNumber(reply[1]) };
    });
  }

  userState(uid: string): Promise<StoredUserState> {
    return this.readUser(uid, () => this.userStateOnce(uid));
  }

  private async userStateOnce(uid: string): Promise<StoredUserState> {
    const reply = asArray(
      await this.userScript(uid, (runId, k) => this.client.userState(k.meta, k.records, mutedMentionsKey(this.prefix, uid), runId, this.headsInStep())),
    );
    const records = asStrings(reply[2]);
    const states = [];
    for (let i = 0; i + 1 < records.length; i += 2) {
      const rec = decodeRecord(records[i] ?? '', records[i + 1] ?? '');
      if (rec.member) states.push(toConvState(rec));
    }
    const t = asStrings(reply[3]);
    const categories = new Map<string, number>();
    for (let i = 2; i + 1 < t.length; i += 2) {
      const n = Number(t[i + 1]);
      if (n !== 0) categories.set(t[i] ?? '', n);
    }
    return {
      epoch: asString(reply[0]),
      version: asNumber(reply[1]),
      states,
      totals: { total: Number(t[0] ?? 0), mentions: Number(t[1] ?? 0), categories },
      ...withHeads(reply[4]),
      ...this.mutedMentionsOf(reply[5]),
    };
  }

  /** The setting as pull.lua and user_state.lua read it, as StoredUserState's field (none: Redis does not know). */
  private mutedMentionsOf(raw: Reply | undefined): { mutedMentions?: boolean } {
    const on = this.readPositions.mutedMentionsOf(asString(raw));
    return on === undefined ? {} : { mutedMentions: on };
  }

  /** The badge hook's marks (../badge-marks.ts), over this engine's connection. */
  badgeMarks(): BadgeMarks {
    this.marks ??= new RedisBadgeMarks({ client: this.client, prefix: this.prefix, cluster: this.cluster });
    return this.marks;
  }

  /** The badge hook's argument of the steps that mark (now in ms), or '' when it is off: the scripts then test one string. */
  private hookNow(): number | '' {
    return this.options.badgeMarks ? Date.now() : '';
  }

  /** The durable tier's side of this store (the drainer and the cold sweep), over this engine's connection. */
  durableStore(): DurableStore {
    this.durableSide ??= new RedisDurableStore({ client: this.client, runs: this.runs, prefix: this.prefix, cluster: this.cluster });
    return this.durableSide;
  }

  private get durable(): RedisDurableOptions | undefined {
    return this.options.durable;
  }

  /** The operator's view of this store (server/engine/admin.ts), over this engine's connection. */
  admin(): EngineAdmin {
    this.toolbox ??= new RedisAdmin({
      client: this.client,
      runs: this.runs,
      prefix: this.prefix,
      idleSeconds: this.idleSeconds,
      publish: this.publish,
      cluster: this.cluster,
      durable: this.durable !== undefined,
      ...(this.durable ? { restoreConversations: (convs: readonly string[]) => this.restoreConversations(convs) } : {}),
    });
    return this.toolbox;
  }

  async ready(): Promise<boolean> {
    // Not connected: answer now instead of waiting in the offline queue for a reconnect.
    if (this.client.status !== 'ready') return false;
    // A PING sent just as the connection drops waits for the reconnect: bound it, a readiness
    // probe must answer.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), READY_TIMEOUT_MS);
    });
    const check = async (): Promise<boolean> => {
      // Every master: a cluster missing one cannot serve the users whose slots it holds.
      const answers = await Promise.all(
        this.runs.masters().map(async (node) => {
          if ((await node.ping()) !== 'PONG') return false;
          await ensureLibrary(node, this.library);
          return true;
        }),
      );
      if (!answers.every(Boolean)) return false;
      // Not ready to take writes until user scripts can run, i.e. the run ids are known.
      await this.runs.learnAll(Date.now() + READY_TIMEOUT_MS);
      return true;
    };
    try {
      return await Promise.race([check(), timeout]);
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The servers holding the data (every master, on a cluster): for the start-up check of their settings. */
  masters(): Redis[] {
    return this.runs.masters();
  }

  async close(): Promise<void> {
    this.runs.close();
    await this.notifications.close();
    if (this.client.status === 'end') return;
    if (this.client.status === 'ready') {
      await quitWithin(this.client, this.options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS);
    } else {
      this.client.disconnect();
    }
  }

  /**
   * Runs `call` once per server for the items whose key it holds (one Redis: all of them), in
   * parallel, in chunks of at most MAX_SCRIPT_ARGS arguments (by `weight`): a burst never builds
   * an unbounded command, nor a script that holds Redis for long. On a cluster a slot may move
   * between grouping and running: an item the script found elsewhere comes back not done, and goes
   * again on its own (routed by its own key).
   */
  private async perServer(
    items: Grouped[],
    weight: (index: number) => number,
    call: (group: Grouped[], cluster: boolean) => Promise<{ index: number; done: boolean }[]>,
  ): Promise<void> {
    if (items.length === 0) return;
    const cluster = this.client instanceof Cluster;
    // One lookup per item (a flush of a 100-member group has 100): the server's chunks and the
    // arguments its last chunk holds, together.
    const groups = new Map<string, { chunks: Grouped[][]; used: number }>();
    for (const item of items) {
      const server = cluster ? this.runs.serverOf(item.key) || `?${item.index}` : '';
      const w = weight(item.index);
      let g = groups.get(server);
      if (!g) groups.set(server, (g = { chunks: [[]], used: 0 }));
      let last = g.chunks[g.chunks.length - 1] as Grouped[];
      if (last.length > 0 && g.used + w > MAX_SCRIPT_ARGS) {
        g.chunks.push((last = []));
        g.used = 0;
      }
      last.push(item);
      g.used += w;
    }
    const settled = await Promise.allSettled(
      [...groups.values()]
        .flatMap((g) => g.chunks)
        .map(async (group) => {
          const outcome = await call(group, cluster);
          if (outcome.every((o) => o.done)) return;
          const again = outcome.filter((o) => !o.done).map((o) => group.find((g) => g.index === o.index) as Grouped);
          await Promise.all(
            again.map(async (item) => {
              const [retry] = await call([item], cluster);
              if (!retry?.done) throw new OutcomeUnknownError('redirect', `Redis Cluster: the slot of ${item.key} keeps moving; outcome unknown`);
            }),
          );
        }),
    );
    // Several calls (one per server, or chunks): if some landed, a failure of another is a half
    // made change, whatever that call reported.
    if (settled.some((r) => r.status === 'rejected')) throw ofParts(settled);
  }

  /** Runs a script that reads or creates a user's epoch: see RunTracker.userScript. */
  private userScript(uid: string, script: (runId: string, keys: UserKeys) => Promise<Reply>): Promise<Reply> {
    const keys = userKeys(this.prefix, uid);
    return this.runs.userScript(keys.meta, (runId) => script(runId, keys));
  }
}

export function createRedisEngine(options: RedisEngineOptions): Promise<RedisEngine> {
  return RedisEngine.create(options);
}

/** An item of a per-server call: the key that places it, and its position in the caller's list. */
interface Grouped {
  key: string;
  index: number;
}

/**
 * Arguments of one script call, at most (an item larger than this still goes, alone): bounded so
 * that no burst builds an unbounded command (spreading arguments overflows the call stack near
 * 100k) and no single script holds Redis for long: every other command waits while one runs.
 * 1,024 is about 140 one-to-one message ops, 2–6 ms inside Redis on a loaded 2-core machine
 * (4,096 held it 21–36 ms); the calls of one flush still go out in one write (auto-pipelining),
 * and the cost per call measured no different at 7 ops per call than at 1,000.
 */
const MAX_SCRIPT_ARGS = 1_024;

/** A backing that cannot answer for what may be lost makes the request fail as unavailable: serving an empty state would lose what it holds. */
/** What user_restore.lua and conv_restore.lua answer when an eviction came between the caller's read of PostgreSQL and the write. */
const STALE_RESTORE = 3;
/** Each retry follows an eviction of the same key during the previous one's PostgreSQL read: in practice one attempt, two when a sweep races it. */
const RESTORE_ATTEMPTS = 5;

function restoreRaced(kind: string, keys: readonly string[]): StoreUnavailableError {
  return new StoreUnavailableError('restore', `${keys.length} ${kind} were evicted again during each of ${RESTORE_ATTEMPTS} restores (first: ${keys[0]})`);
}

function backingDown(err: unknown): StoreUnavailableError {
  const reason = err instanceof Error ? err.message : String(err);
  return new StoreUnavailableError('restore', `cannot restore from the durable tier: ${reason}`, { cause: err });
}

/** What a script puts in its reply where an item's keys turned out not to be on its server. */
const MOVED = 'moved';
/** What a durable script answers for a user or conversation Redis lacks (nothing of it was applied). */
const ABSENT = 'absent';

function userApplyKeys(k: UserKeys): string[] {
  return [k.meta, k.records, k.stream, k.snapshot, k.large];
}

/** Whether a message adds non-counting seqs (issue 43: `counts: false`, or recalls). */
function countsLess(m: MessageEvent): boolean {
  return m.counts === false || (m.recalls !== undefined && m.recalls.length > 0);
}

/** A conversation's part of conv_record.lua's reply: its info and who it listed (a write-diffused one lists its '#' fields too). */
function recordedOf(conv: string, part: Reply): RecordedMessage {
  const p = asArray(part);
  const info = convInfo(conv, p);
  const listed = asStrings(p[5]);
  const members = info.large ? listed : listed.filter((f) => !f.startsWith(CONV_FIELD));
  if (p[6] == null && p[7] == null) return { info, members };
  const held = uidSeqLists(p[6]);
  const ahead = uidSeqLists(p[7]);
  return { info, members, ...(held ? { drops: held } : {}), ...(ahead ? { ahead } : {}) };
}

/** Issue 43: {uid, 'a,b', ...}, the members whose mentions of those seqs go (none or empty: undefined). */
function uidSeqLists(part: Reply | undefined): Map<string, number[]> | undefined {
  if (part == null) return undefined;
  const pairs = asStrings(part);
  if (pairs.length === 0) return undefined;
  const out = new Map<string, number[]>();
  for (let i = 0; i + 1 < pairs.length; i += 2) out.set(pairs[i] as string, (pairs[i + 1] as string).split(',').map(Number));
  return out;
}

/**
 * User ops one ingest_flush call applies at most (else the flush goes as two steps, the user
 * steps in chunks): about what MAX_SCRIPT_ARGS of user_apply.lua arguments carry (9 per
 * one-op user), so one script holds Redis no longer than before.
 */
const MAX_FLUSH_OPS = 113;

/** A script's `{conv, head, ...}` reply as StoredPull's `heads` (none read: no field, as on a Cluster). */
function withHeads(reply: Reply | undefined): { heads?: Map<string, number> } {
  const pairs = reply === undefined ? [] : asStrings(reply);
  if (pairs.length === 0) return {};
  const heads = new Map<string, number>();
  for (let i = 0; i + 1 < pairs.length; i += 2) heads.set(pairs[i] ?? '', Number(pairs[i + 1]));
  return { heads };
}
