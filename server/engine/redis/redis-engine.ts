import { Cluster, Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import { LIMITS } from '../../../protocol/limits.js';
import type { ConvEntry, Cursor, Snapshot } from '../../../protocol/types.js';
import { StoreHealth } from '../../ops/store-health.js';
import { redisAddress, watchCluster, watchRedis } from '../../ops/watch-redis.js';
import { connectionOptions, DEFAULT_STORE_TIMEOUT_MS, quitWithin, type RedisTarget } from '../../redis-target.js';
import type {
  ConvInfo,
  Engine,
  EngineOptions,
  RecordedMessage,
  StoredPull,
  StoredUserState,
  UserOp,
  UserOpResult,
} from '../engine.js';
import { toConvState } from '../rules.js';
import { StoreUnavailableError, UnknownConversationError } from '../store-errors.js';
import {
  asArray,
  asBuffer,
  asNumber,
  asStrings,
  decodeRecord,
  decodeSnapshotConvs,
  decodeState,
  type Reply,
} from './codec.js';
import { CommandGuard, guardCommands } from './command-guard.js';
import { convKeys, userKeys, type UserKeys } from './keys.js';
import { ClusterRuns, SingleRun, type RunTracker, type RunWaits } from './runs.js';
import {
  defineScripts,
  ensureScriptsLoaded,
  loadScriptSources,
  scriptShas,
  type ScriptedCluster,
  type ScriptedRedis,
  type ScriptName,
} from './scripts.js';

/**
 * One Redis (`url`) or a Redis Cluster (`cluster`: seed nodes), plus the engine options.
 * `prefix` (default `rp`) starts every key; it lets several engines share one Redis, e.g. in tests.
 * `storeTimeoutMs` bounds every store call (STORE_TIMEOUT_MS); `health` hears of each connection's
 * state changes and of failed calls.
 */
export type RedisEngineOptions = EngineOptions &
  RedisTarget & { prefix?: string; storeTimeoutMs?: number; health?: StoreHealth };

const READY_TIMEOUT_MS = 1_000;

/** Same length as the memory engine's epochs. */
const newEpoch = (): string => nanoid(12);

/**
 * The Redis engine. Each per-user change is ONE Lua script over keys sharing the user's hash tag
 * (record, totals, version, stream entry, snapshot and trim change together); conversation-level
 * changes are one script over the conversation's keys. No command spans two hash tags, so the same
 * engine runs on one Redis and on a Redis Cluster (ioredis `Cluster`, which routes each command
 * and script to the master of its slot).
 *
 * Epochs and the Redis run. A user's epoch (DESIGN.md §3) must change whenever the history behind
 * it may have changed. Redis can lose its last writes and keep the rest (with AOF `appendfsync
 * everysec` a crash loses up to a second): the epoch survives but the version goes back, and once
 * new writes reach a version a client already holds, a delta from that client's cursor would
 * continue a history it never saw. Redis loses writes only across a restart (or a failover to
 * another server), i.e. under a new `run_id`. So each user's meta stores the run id it was last used under (`rid`), and every script
 * that reads or creates an epoch (user_apply, pull, user_state, position) gets the current run id
 * of the server holding the user's keys: on a mismatch it starts a new epoch. Versions continue
 * from what Redis kept; the stream and snapshots stay (they match the state Redis kept). A cursor
 * of the old epoch gets a snapshot. The price: every Redis restart, even one that lost nothing
 * (AOF `always`, a clean SHUTDOWN), costs each client one snapshot, since the engine cannot tell
 * the two apart. On a cluster that holds per master: a master's restart or failover rotates the
 * epochs of the users whose keys it holds, and no others.
 *
 * Which run id a script carries, and when its reply is trusted, is `RunTracker`'s job (runs.ts):
 * a user script goes out only once the run id of the connection it goes out on is known, and a
 * reply that may have been resent to another run (ioredis resends in-flight commands after a
 * reconnect, a Cluster also after MOVED) is rejected: the outcome of the op is unknown, as for any
 * command cut off by a disconnect, and the user's next script under the new run id rotates the
 * epoch anyway.
 *
 * Several server processes share one Redis and learn its run id independently, so around a
 * restart they may briefly disagree (e.g. one's resent script carries the old id after another
 * already rotated the user under the new one). Each disagreement only rotates the epoch once more:
 * a rotation never lets a cursor continue (no client holds the fresh epoch), so it is safe and
 * costs at most an extra snapshot per client.
 */
export class RedisEngine implements Engine {
  readonly kind = 'redis' as const;
  private readonly prefix: string;

  private constructor(
    private readonly client: ScriptedRedis | ScriptedCluster,
    private readonly runs: RunTracker,
    private readonly options: RedisEngineOptions,
    private readonly sources: Record<ScriptName, string>,
    private readonly shas: string[],
  ) {
    this.prefix = options.prefix ?? 'rp';
    // Without a listener ioredis prints every failed reconnect (and a Cluster's 'error' event
    // would throw); callers learn of an outage from ready() and from failing commands instead.
    client.on('error', () => undefined);
  }

  /** Connects and loads the scripts; rejects when Redis does not answer or a script is invalid. */
  static async create(options: RedisEngineOptions): Promise<RedisEngine> {
    const timeoutMs = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    const health = options.health ?? new StoreHealth(undefined, undefined, timeoutMs);
    // Auto-pipelining: the per-member scripts of one ingest batch go out in one round trip (on a
    // Cluster: one per master). No offline queue on one Redis: a command either goes out over a
    // ready connection (CommandGuard waits for one, bounded) or fails as not sent, never queued to
    // be sent after its caller was told it failed. (A Cluster's node connections always queue.)
    const client =
      options.url !== undefined
        ? new Redis(options.url, { ...connectionOptions(timeoutMs), enableAutoPipelining: true, lazyConnect: true, enableOfflineQueue: false })
        : new Cluster([...options.cluster], {
            enableAutoPipelining: true,
            lazyConnect: true,
            redisOptions: connectionOptions(timeoutMs),
            // A restarted master answers CLUSTERDOWN for its first 2 s (Redis lets the cluster
            // reconfigure it before it takes writes): retry for 16 x 200 ms rather than the
            // default 1.6 s, so a quick restart delays commands (up to the store timeout) instead
            // of failing them.
            retryDelayOnClusterDown: 200,
          });
    const whole = client instanceof Cluster ? 'engine@cluster' : `engine@${redisAddress(client)}`;
    if (client instanceof Cluster) watchCluster(health, 'engine', client);
    else watchRedis(health, whole, client);
    const swallow = (): void => {}; // connect() rejects with the same error
    client.on('error', swallow);
    try {
      const sources = loadScriptSources();
      const shas = scriptShas(sources);
      await client.connect().catch((err: unknown) => {
        const reason = err instanceof Error ? err.message : String(err);
        throw new StoreUnavailableError('not_ready', `cannot connect to Redis: ${reason}`, { cause: err });
      });
      const waits: RunWaits = { deadline: () => health.waitDeadline(whole, timeoutMs), failed: (err) => health.failed(err) };
      // On a cluster, scripts are loaded on each new master connection before user scripts use it.
      const runs =
        client instanceof Cluster
          ? new ClusterRuns(client, (node) => ensureScriptsLoaded(node, sources, shas), waits)
          : new SingleRun(client, redisAddress(client), waits);
      await defineScripts(client, runs.masters(), sources);
      const guard = new CommandGuard(runs, waits, health, (address) => `engine@${address}`, timeoutMs);
      const guarded = guardCommands(client as ScriptedRedis | ScriptedCluster, guard);
      const engine = new RedisEngine(guarded, runs, options, sources, shas);
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

  async ensureConversation(conv: string, category?: string): Promise<ConvInfo> {
    const k = convKeys(this.prefix, conv);
    const given = category !== undefined;
    const reply = await this.client.convEnsureBuffer(k.meta, k.members, given ? '1' : '0', category ?? 'default');
    return convInfo(conv, asArray(reply));
  }

  async getConversation(conv: string): Promise<ConvInfo | null> {
    const k = convKeys(this.prefix, conv);
    const reply = await this.client.convGetBuffer(k.meta, k.members);
    return reply === null ? null : convInfo(conv, asArray(reply));
  }

  async recordMessage(conv: string, seq: number): Promise<RecordedMessage | null> {
    const k = convKeys(this.prefix, conv);
    const reply = await this.client.convRecordBuffer(k.meta, k.members, seq);
    if (reply === null) return null;
    const parts = asArray(reply);
    const info = convInfo(conv, parts);
    return info.large ? { info } : { info, members: asStrings(parts[4]) };
  }

  async changeMembers(conv: string, add: readonly string[], remove: readonly string[]): Promise<number> {
    const k = convKeys(this.prefix, conv);
    const count = asNumber(await this.client.convMembersBuffer(k.meta, k.members, add.length, ...add, ...remove));
    if (count < 0) throw new UnknownConversationError(conv);
    return count;
  }

  async members(conv: string): Promise<string[]> {
    return this.client.smembers(convKeys(this.prefix, conv).members);
  }

  async setConversationMode(conv: string, large: boolean): Promise<void> {
    const ok = asNumber(await this.client.convModeBuffer(convKeys(this.prefix, conv).meta, large ? '1' : '0'));
    if (ok !== 1) throw new UnknownConversationError(conv);
  }

  async heads(convs: readonly string[]): Promise<Record<string, number>> {
    // One HMGET per conversation (each its own hash tag), pipelined by auto-pipelining.
    const replies = await Promise.all(convs.map((conv) => this.client.hmget(convKeys(this.prefix, conv).meta, 'exists', 'maxSeq')));
    const out: Record<string, number> = {};
    replies.forEach(([exists, maxSeq], i) => {
      const conv = convs[i];
      if (conv !== undefined && exists === '1' && maxSeq != null) out[conv] = Number(maxSeq);
    });
    return out;
  }

  async applyUserOps(ops: readonly UserOp[]): Promise<UserOpResult[]> {
    // Issued together so that auto-pipelining sends them in one round trip; Redis runs them in
    // this order, so ops on the same user keep their order too.
    return Promise.all(ops.map((op) => this.applyUserOp(op)));
  }

  async pull(uid: string, since: Cursor | null, limit: number): Promise<StoredPull> {
    const k = userKeys(this.prefix, uid);
    const reply = asArray(
      await this.userScript(uid, (runId) =>
        this.client.pullBuffer(
          k.meta,
          k.stream,
          k.snaps,
          k.large,
          newEpoch(),
          runId,
          since ? since.epoch : '-',
          since?.version ?? 0,
          Math.max(0, Math.floor(limit)),
          this.options.snapshotEvery,
        ),
      ),
    );
    const version = asNumber(reply[1]);
    let snapshot: Snapshot | undefined;
    if (asNumber(reply[3]) === 1) {
      snapshot = { v: asNumber(reply[4]), convs: decodeSnapshotConvs(asBuffer(reply[5])) };
    }
    const flat = asArray(reply[6]);
    const entries: ConvEntry[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      entries.push({ v: asNumber(flat[i]), conv: asBuffer(flat[i + 1]).toString(), state: decodeState(asBuffer(flat[i + 2])) });
    }
    return {
      epoch: asBuffer(reply[0]).toString(),
      ...(snapshot ? { snapshot } : {}),
      entries,
      version,
      more: asNumber(reply[2]) === 1,
      largeConvs: asStrings(reply[7]),
    };
  }

  async position(uid: string): Promise<Cursor> {
    const meta = userKeys(this.prefix, uid).meta;
    const reply = asArray(await this.userScript(uid, (runId) => this.client.positionBuffer(meta, newEpoch(), runId)));
    return { epoch: asBuffer(reply[0]).toString(), version: asNumber(reply[1]) };
  }

  async userState(uid: string): Promise<StoredUserState> {
    const k = userKeys(this.prefix, uid);
    const reply = asArray(await this.userScript(uid, (runId) => this.client.userStateBuffer(k.meta, k.convs, k.totals, newEpoch(), runId)));
    const states = asArray(reply[2])
      .map((r) => decodeRecord(asBuffer(r)))
      .filter((r) => r.member)
      .map(toConvState);
    const totals: StoredUserState['totals'] = { total: 0, mentions: 0, categories: {} };
    const fields = asStrings(reply[3]);
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const field = fields[i] ?? '';
      const value = Number(fields[i + 1]);
      if (field === 'total') totals.total = value;
      else if (field === 'mentions') totals.mentions = value;
      else if (field.startsWith('cat:') && value !== 0) totals.categories[field.slice(4)] = value;
    }
    return { epoch: asBuffer(reply[0]).toString(), version: asNumber(reply[1]), states, totals };
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
          await ensureScriptsLoaded(node, this.sources, this.shas);
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
    if (this.client.status === 'end') return;
    if (this.client.status === 'ready') {
      await quitWithin(this.client, this.options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS);
    } else {
      this.client.disconnect();
    }
  }

  /** Runs a script that reads or creates a user's epoch: see RunTracker.userScript. */
  private userScript(uid: string, script: (runId: string) => Promise<Reply>): Promise<Reply> {
    return this.runs.userScript(userKeys(this.prefix, uid).meta, script);
  }

  private async applyUserOp(op: UserOp): Promise<UserOpResult> {
    const k = userKeys(this.prefix, op.uid);
    const keys = userApplyKeys(k);
    const reply = asArray(await this.userScript(op.uid, (runId) => this.client.userApplyBuffer(...keys, ...this.userApplyArgs(op, runId))));
    return {
      changed: asNumber(reply[0]) === 1,
      member: asNumber(reply[1]) === 1,
      epoch: asBuffer(reply[2]).toString(),
      version: asNumber(reply[3]),
      state: decodeState(asBuffer(reply[4])),
    };
  }

  private userApplyArgs(op: UserOp, runId: string): (string | number)[] {
    const head = [newEpoch(), runId, this.options.snapshotEvery, this.options.streamMaxLen, LIMITS.mentionSeqsPerConversation, op.type, op.conv];
    switch (op.type) {
      case 'message':
        return [...head, op.lastSeq, op.readSeq, ...op.mentionSeqs];
      case 'read':
        return [...head, op.seq];
      case 'join':
        return [...head, op.head, op.category, op.large ? '1' : '0'];
      case 'leave':
        return head;
      case 'delete':
        return [...head, op.head];
      case 'settings':
        return [...head, flag(op.muted), flag(op.markedUnread)];
      case 'mode':
        return [...head, op.large ? '1' : '0', op.head];
      case 'category':
        return [...head, op.category];
    }
  }
}

export function createRedisEngine(options: RedisEngineOptions): Promise<RedisEngine> {
  return RedisEngine.create(options);
}

function userApplyKeys(k: UserKeys): string[] {
  return [k.meta, k.convs, k.totals, k.stream, k.snaps, k.large];
}

/** Settings are tri-state: set, cleared, or left as they are. */
function flag(v: boolean | undefined): string {
  return v === undefined ? '-' : v ? '1' : '0';
}

function convInfo(conv: string, parts: Reply[]): ConvInfo {
  return {
    conv,
    maxSeq: asNumber(parts[0]),
    large: asNumber(parts[1]) === 1,
    category: asBuffer(parts[2]).toString(),
    memberCount: asNumber(parts[3]),
  };
}
