import { Cluster, Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import { LIMITS } from '../../../protocol/limits.js';
import type { Cursor, Snapshot } from '../../../protocol/types.js';
import type { RedisTarget } from '../../redis-target.js';
import type {
  ApplyOptions,
  ConvInfo,
  Engine,
  EngineOptions,
  MembersChange,
  MembersStep,
  MemberTag,
  RecordedMessage,
  Roster,
  StoredPull,
  StoredUserState,
  UserOp,
  UserOpResult,
} from '../engine.js';
import type { EngineAdmin } from '../admin.js';
import { toConvState } from '../rules.js';
import { asArray, asNumber, asString, asStrings, decodeEntries, decodeRecord, decodeSnapshotText, decodeState, type Reply } from './codec.js';
import { convChannel, convKey, userChannel, userKeys, type UserKeys } from './keys.js';
import { RedisAdmin } from './redis-admin.js';
import { publishCommand, RedisNotifications } from './redis-notifications.js';
import { ClusterRuns, SingleRun, type RunTracker } from './runs.js';
import { defineScripts, ensureScriptsLoaded, loadScriptSources, scriptShas, type ScriptedCluster, type ScriptedRedis, type ScriptName } from './scripts.js';
import { userApplyArgs } from './user-ops.js';

/**
 * One Redis (`url`) or a Redis Cluster (`cluster`: seed nodes), plus the engine options.
 * `prefix` (default `rp`) starts every key and channel; it lets several engines share one Redis,
 * e.g. in tests.
 */
export type RedisEngineOptions = EngineOptions & RedisTarget & { prefix?: string };

const READY_TIMEOUT_MS = 1_000;
/** Conversations' `#`-fields; every other field of a conversation hash is a member. */
const CONV_FIELD = '#';
/** Candidates checked in the record script itself; more are checked right after it (still after the head was raised). */
const CANDIDATES_PER_SCRIPT = 1_000;
const DEFAULT_IDLE_SECONDS = 7 * 24 * 3600;

/** Same length as the memory engine's epochs. */
const newEpoch = (): string => nanoid(12);

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
  private readonly prefix: string;
  private readonly publish: 'PUBLISH' | 'SPUBLISH';
  private readonly idleSeconds: number;
  private toolbox: RedisAdmin | undefined;

  private constructor(
    private readonly client: ScriptedRedis | ScriptedCluster,
    private readonly runs: RunTracker,
    private readonly options: RedisEngineOptions,
    private readonly sources: Record<ScriptName, string>,
    private readonly shas: string[],
  ) {
    this.prefix = options.prefix ?? 'rp';
    this.publish = publishCommand(options);
    this.idleSeconds = options.streamIdleSeconds ?? DEFAULT_IDLE_SECONDS;
    this.notifications = new RedisNotifications(options, this.prefix);
    // Without a listener ioredis prints every failed reconnect (and a Cluster's 'error' event
    // would throw); callers learn of an outage from ready() and from failing commands instead.
    client.on('error', () => undefined);
  }

  /** Connects and loads the scripts; rejects when Redis does not answer or a script is invalid. */
  static async create(options: RedisEngineOptions): Promise<RedisEngine> {
    // Auto-pipelining: the per-user scripts of one ingest batch go out in one round trip (on a
    // Cluster: one per master).
    const client =
      options.url !== undefined
        ? new Redis(options.url, { enableAutoPipelining: true, lazyConnect: true })
        : new Cluster([...options.cluster], {
            enableAutoPipelining: true,
            lazyConnect: true,
            // A restarted master answers CLUSTERDOWN for its first 2 s (Redis lets the cluster
            // reconfigure it before it takes writes): retry for 16 x 200 ms rather than the
            // default 1.6 s, so a quick restart delays commands instead of failing them.
            retryDelayOnClusterDown: 200,
          });
    const swallow = (): void => {}; // connect() rejects with the same error
    client.on('error', swallow);
    try {
      const sources = loadScriptSources();
      const shas = scriptShas(sources);
      await client.connect();
      // On a cluster, scripts are loaded on each new master connection before user scripts use it.
      const runs =
        client instanceof Cluster ? new ClusterRuns(client, (node) => ensureScriptsLoaded(node, sources, shas)) : new SingleRun(client);
      await defineScripts(client, runs.masters(), sources);
      const engine = new RedisEngine(client as ScriptedRedis | ScriptedCluster, runs, options, sources, shas);
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
    const reply = asArray(
      await this.client.convMembers(convKey(this.prefix, conv), change.threshold, given ? '1' : '0', change.category ?? 'default', add.length, ...add, ...remove),
    );
    const info: ConvInfo = {
      conv,
      maxSeq: asNumber(reply[0]),
      large: asNumber(reply[1]) === 1,
      category: asString(reply[2]),
      memberCount: asNumber(reply[3]),
      gen: asNumber(reply[4]),
    };
    const flat = asStrings(reply[6]);
    const joins: MemberTag[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) joins.push(parseTag(flat[i] ?? '', flat[i + 1] ?? ''));
    return { info, joins, leaves: remove, rewrite: asNumber(reply[5]) === 1 };
  }

  async roster(conv: string): Promise<Roster | null> {
    const all = await this.client.hgetall(convKey(this.prefix, conv));
    if (all[`${CONV_FIELD}s`] === undefined) return null;
    const members: MemberTag[] = [];
    for (const [field, value] of Object.entries(all)) if (!field.startsWith(CONV_FIELD)) members.push(parseTag(field, value));
    return { info: convInfo(conv, [all['#s'], all['#l'], all['#c'], all['#g'], all['#n']]), members };
  }

  async finishRewrite(conv: string, gen: number): Promise<void> {
    await this.client.convFinishRewrite(convKey(this.prefix, conv), gen);
  }

  async getConversation(conv: string): Promise<ConvInfo | null> {
    const meta = await this.client.hmget(convKey(this.prefix, conv), '#s', '#l', '#c', '#g', '#n');
    return meta[0] == null ? null : convInfo(conv, meta);
  }

  async missingConversations(convs: readonly string[]): Promise<string[]> {
    const found = await Promise.all(convs.map((conv) => this.client.exists(convKey(this.prefix, conv))));
    return convs.filter((_, i) => found[i] === 0);
  }

  async recordMessage(conv: string, seq: number, candidates: readonly string[], at?: number): Promise<RecordedMessage | null> {
    const key = convKey(this.prefix, conv);
    const first = candidates.slice(0, CANDIDATES_PER_SCRIPT);
    const reply = await this.client.convRecord(key, seq, at ?? '', convChannel(this.prefix, conv), this.publish, ...first);
    if (reply === null) return null;
    const parts = asArray(reply);
    const info = convInfo(conv, [parts[0], parts[1], parts[2], parts[3], parts[4]].map(String));
    const listed = asStrings(parts[5]);
    if (!info.large) return { info, members: listed.filter((f) => !f.startsWith(CONV_FIELD)) };
    // Checked after the head was raised, so still right: whoever joins after the raise starts at
    // or above this seq and needs no op for it.
    for (let i = CANDIDATES_PER_SCRIPT; i < candidates.length; i += CANDIDATES_PER_SCRIPT) {
      const chunk = candidates.slice(i, i + CANDIDATES_PER_SCRIPT);
      const tags = await this.client.hmget(key, ...chunk);
      chunk.forEach((uid, j) => {
        if (tags[j] != null) listed.push(uid);
      });
    }
    return { info, members: listed };
  }

  async heads(convs: readonly string[]): Promise<Map<string, number>> {
    // One HGET per conversation (each its own hash tag), pipelined by auto-pipelining.
    const replies = await Promise.all(convs.map((conv) => this.client.hget(convKey(this.prefix, conv), '#s')));
    const out = new Map<string, number>();
    replies.forEach((maxSeq, i) => {
      const conv = convs[i];
      if (conv !== undefined && maxSeq != null) out.set(conv, Number(maxSeq));
    });
    return out;
  }

  async applyUserOps(ops: readonly UserOp[], options: ApplyOptions = {}): Promise<UserOpResult[]> {
    // One script per user, carrying that user's ops in order; issued together so that
    // auto-pipelining sends them in one round trip.
    const byUser = new Map<string, number[]>();
    ops.forEach((op, i) => {
      const list = byUser.get(op.uid);
      if (list) list.push(i);
      else byUser.set(op.uid, [i]);
    });
    const results = new Array<UserOpResult>(ops.length);
    const at = options.at === undefined ? '' : options.at.toFixed(3);
    await Promise.all(
      [...byUser].map(async ([uid, indexes]) => {
        const mine = indexes.map((i) => ops[i] as UserOp);
        const reply = asArray(await this.userScript(uid, (runId, k) => this.client.userApply(...userApplyKeys(k), ...this.applyArgs(uid, runId, at), ...userApplyArgs(mine))));
        const epoch = asString(reply[0]);
        indexes.forEach((opIndex, j) => {
          const o = 1 + j * 4;
          results[opIndex] = {
            changed: asNumber(reply[o]) === 1,
            member: asNumber(reply[o + 1]) === 1,
            epoch,
            version: asNumber(reply[o + 2]),
            state: decodeState(asString(reply[o + 3])),
          };
        });
      }),
    );
    return results;
  }

  async pull(uid: string, since: Cursor | null, limit: number): Promise<StoredPull> {
    const reply = asArray(
      await this.userScript(uid, (runId, k) =>
        this.client.pull(
          ...userApplyKeys(k),
          newEpoch(),
          runId,
          since ? since.epoch : '-',
          since?.version ?? 0,
          Math.max(0, Math.floor(limit)),
          this.options.snapshotEvery,
          this.options.streamMaxLen,
          this.idleSeconds,
        ),
      ),
    );
    const version = asNumber(reply[1]);
    const texts = asArray(reply[6]);
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
    };
  }

  async position(uid: string): Promise<Cursor> {
    const reply = asArray(await this.userScript(uid, (runId, k) => this.client.position(k.meta, newEpoch(), runId)));
    return { epoch: asString(reply[0]), version: asNumber(reply[1]) };
  }

  async userState(uid: string): Promise<StoredUserState> {
    const reply = asArray(await this.userScript(uid, (runId, k) => this.client.userState(k.meta, k.records, newEpoch(), runId)));
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
    };
  }

  /** The operator's view of this store (server/engine/admin.ts), over this engine's connection. */
  admin(): EngineAdmin {
    this.toolbox ??= new RedisAdmin({ client: this.client, runs: this.runs, prefix: this.prefix, idleSeconds: this.idleSeconds, publish: this.publish });
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

  async close(): Promise<void> {
    this.runs.close();
    await this.notifications.close();
    if (this.client.status === 'end') return;
    if (this.client.status === 'ready') {
      await this.client.quit().catch(() => this.client.disconnect());
    } else {
      this.client.disconnect();
    }
  }

  /** Runs a script that reads or creates a user's epoch: see RunTracker.userScript. */
  private userScript(uid: string, script: (runId: string, keys: UserKeys) => Promise<Reply>): Promise<Reply> {
    const keys = userKeys(this.prefix, uid);
    return this.runs.userScript(keys.meta, (runId) => script(runId, keys));
  }

  private applyArgs(uid: string, runId: string, at: string): (string | number)[] {
    return [
      newEpoch(),
      runId,
      this.options.snapshotEvery,
      this.options.streamMaxLen,
      LIMITS.mentionSeqsPerConversation,
      this.idleSeconds,
      userChannel(this.prefix, uid),
      this.publish,
      at,
      Math.floor(Date.now() / 1000),
    ];
  }
}

export function createRedisEngine(options: RedisEngineOptions): Promise<RedisEngine> {
  return RedisEngine.create(options);
}

function userApplyKeys(k: UserKeys): string[] {
  return [k.meta, k.records, k.stream, k.snapshot, k.large];
}

export function parseTag(uid: string, tag: string): MemberTag {
  const bar = tag.indexOf('|');
  return { uid, joinGen: Number(tag.slice(0, bar)), joinHead: Number(tag.slice(bar + 1)) };
}

/** `#s #l #c #g #n` of a conversation hash, in that order. */
export function convInfo(conv: string, parts: ReadonlyArray<string | null | undefined>): ConvInfo {
  return {
    conv,
    maxSeq: Number(parts[0] ?? 0),
    large: parts[1] === '1',
    category: parts[2] ?? 'default',
    memberCount: Number(parts[4] ?? 0),
    gen: Number(parts[3] ?? 0),
  };
}
