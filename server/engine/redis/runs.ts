import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { OutcomeUnknownError, type StoreError, StoreUnavailableError } from '../store-errors.js';
import type { Reply } from './codec.js';
import { storeErrorOf } from './driver-errors.js';
import { keySlot } from './keys.js';

/**
 * Which Redis run (`run_id` of INFO server) a user script runs under, and whether its reply can be
 * trusted: the mechanism behind "Epochs and the Redis run" in redis-engine.ts. Every script that
 * reads or creates a user's epoch carries the run id of the server holding the user's keys; a
 * reply is accepted only when it came from that run. One Redis has one run at a time
 * (`SingleRun`); a Redis Cluster has one per master (`ClusterRuns`).
 */
export interface RunTracker {
  /** Runs `script` with the run id of the server holding `key`; rejects a reply that may come from another run. */
  userScript(key: string, script: (runId: string) => Promise<Reply>): Promise<Reply>;
  /** The servers holding user data (the masters, on a cluster); throws when that set is not known. */
  masters(): Redis[];
  /**
   * Which server holds `key` now, as a name to group keys by (one script may carry the keys of
   * one server). '' when not known (a cluster mid-failover): such keys go one by one.
   */
  serverOf(key: string): string;
  /** Resolves once the run id of every master is known; rejects by `deadline` or on a real error (INFO denied). */
  learnAll(deadline: number): Promise<void>;
  /** The ready connection serving `key` now, or undefined (none, or not ready). */
  connection(key: string): ConnectionRef | undefined;
  /** Waits until `deadline` for a ready connection serving `key`; rejects with StoreUnavailableError. */
  waitConnection(key: string, deadline: number): Promise<ConnectionRef>;
  /** Fails the waiters: the engine is closing. */
  close(): void;
}

/**
 * One connection to the server holding a key: `id` changes with every reconnect; `target` names
 * the server; `client` is the driver's connection itself (unguarded), for a command that must go
 * over this very connection (WAIT).
 */
export interface ConnectionRef {
  id: unknown;
  target: string;
  client: Redis;
}

/** How long the tracker waits, and where it reports the typed errors it raises itself. */
export interface RunWaits {
  /** Until when a call may wait for a ready connection (the store timeout, shortened during an outage). */
  deadline(): number;
  failed(err: StoreError): void;
}

/** Without a StoreHealth: wait the default store timeout, report nothing. */
const DEFAULT_WAITS: RunWaits = { deadline: () => Date.now() + 2_000, failed: () => undefined };

/** Pause between two attempts of a command that was not sent (its connection was dying under it). */
const RESEND_PAUSE_MS = 10;

/**
 * Runs `attempt` again while it fails without having been sent, until `deadline`: a command
 * issued over a connection that looked ready but was closing never reached Redis, so sending it
 * over the next connection is safe (what ioredis's offline queue would do, but bounded and
 * without ever sending it after the caller gave up). The first attempt runs in this tick.
 */
export async function retryNotSent<T>(deadline: number, attempt: (deadline: number) => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await attempt(deadline);
    } catch (err) {
      if (!(err instanceof StoreUnavailableError && err.kind === 'not_ready') || Date.now() + RESEND_PAUSE_MS >= deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, RESEND_PAUSE_MS));
    }
  }
}

const IN_FLIGHT = 'Redis reconnected while a user script was in flight; the script may have run under another Redis run, its outcome is unknown';

/** A run id, with the connection it was learned over (a reconnect makes a new one). */
interface Run {
  id: string;
  conn: unknown;
}

/**
 * `learning`, or a timeout error at `deadline`: a Redis stuck right after a reconnect must fail the
 * call within the store timeout (nothing was sent), not after ioredis's 10 s command backstop. The
 * INFO itself goes on, shared by the next caller.
 */
function beforeDeadline<T>(learning: Promise<T>, deadline: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError('timeout', `${what} in time; nothing was sent`)), Math.max(0, deadline - Date.now()));
  });
  return Promise.race([learning, late]).finally(() => clearTimeout(timer));
}

function parseRunId(info: string): string {
  const id = /^run_id:([0-9a-f]+)\r?$/m.exec(info)?.[1];
  if (!id) throw new Error('INFO server did not report a run_id');
  return id;
}

/**
 * The run a user's epoch is tied to: the server's `run_id` AND its replication id
 * (`master_replid`), hashed to 40 hex characters (the size of a run id: it is stored in every
 * user's meta). A run id alone changes on a restart but not on a failover BACK: a master demoted
 * without a restart (SENTINEL FAILOVER, CLUSTER FAILOVER) drops its unreplicated writes when it
 * resyncs as a replica, and when it is promoted again it has its old run id, so users whose meta
 * still carried it would continue their versions over a history that lost writes. Every
 * promotion gives a server a new replication id. (A master left without replicas for
 * `repl-backlog-ttl` also takes a new one: seen at its next reconnect, it costs one snapshot per
 * client, never a wrong delta.)
 */
/** INFO server and INFO replication (several sections in one INFO only from Redis 7), pipelined. */
async function readRunInfo(client: Redis): Promise<string> {
  const [server, replication] = await Promise.all([client.info('server'), client.info('replication')]);
  return `${server}\n${replication}`;
}

export function runOf(info: string): string {
  const replid = /^master_replid:([0-9a-f]+)\r?$/m.exec(info)?.[1];
  if (!replid) throw new Error('INFO did not report a master_replid');
  return createHash('sha1')
    .update(`${parseRunId(info)}:${replid}`)
    .digest('hex');
}

/**
 * One Redis. The run id is learned (INFO server) on connect and again on every reconnect; a user
 * script goes out only once the run id of the connection it goes out on is known. A reply is
 * trusted only if it came back over that connection or over one that reaches the same run:
 * ioredis resends in-flight commands (and flushes its offline queue) over the next connection,
 * where a restarted Redis would run them with the old run id in their ARGV.
 */
export class SingleRun implements RunTracker {
  /** The run id of the current connection, once learned. */
  private run: Run | undefined;
  /** The INFO in flight for the current connection, shared by everyone waiting for it. */
  private learning: { conn: unknown; promise: Promise<Run> } | undefined;
  private readonly changes = new Changes();
  private closing = false;

  constructor(
    private readonly client: Redis,
    /** Names the server in StoreHealth (`engine@host:port`). */
    readonly target: string,
    private readonly waits: RunWaits = DEFAULT_WAITS,
  ) {
    // 'ready' is emitted after ioredis has already resent in-flight commands and flushed its
    // offline queue on the new connection; user scripts never rely on either (see userScript).
    client.on('ready', () => {
      this.changes.signal();
      this.learnRun().catch(() => {}); // a caller that needs it retries and sees the error
    });
    client.on('end', () => this.changes.signal());
  }

  userScript(_key: string, script: (runId: string) => Promise<Reply>): Promise<Reply> {
    // A script that was not sent goes again, under the run id of the connection it goes out on.
    return retryNotSent(this.waits.deadline(), (deadline) => this.userScriptOnce(script, deadline));
  }

  private async userScriptOnce(script: (runId: string) => Promise<Reply>, deadline: number): Promise<Reply> {
    // Known for this connection: issue in this same tick (auto-pipelining batches per tick).
    const known = this.run;
    const current = known && this.client.status === 'ready' && known.conn === this.client.stream;
    const run = current ? known : await this.runFor(deadline);
    const reply = await script(run.id);
    // Replies are handled as soon as they are parsed, before any reconnect can swap the socket:
    // the connection now is the one the reply came back over.
    if (this.client.stream !== run.conn) {
      // It came back over a newer connection: fine if that one reaches the same run (a network
      // blip, not a restart). A run id never repeats and a run is one process lifetime, so
      // matching ids mean every connection in between reached that run too.
      const now = this.client.status === 'ready' ? await this.learnRun().catch(() => undefined) : undefined;
      if (now?.id !== run.id) throw this.fail(new OutcomeUnknownError('untrusted_reply', IN_FLIGHT));
    }
    return reply;
  }

  masters(): Redis[] {
    return [this.client];
  }

  connection(_key: string): ConnectionRef | undefined {
    return this.client.status === 'ready' ? { id: this.client.stream, target: this.target, client: this.client } : undefined;
  }

  async waitConnection(key: string, deadline: number): Promise<ConnectionRef> {
    for (;;) {
      const ready = this.connection(key);
      if (ready) return ready;
      if (this.closing || this.client.status === 'end') throw new StoreUnavailableError('not_ready', 'Redis engine is closed');
      const left = deadline - Date.now();
      if (left <= 0) throw this.fail(notReady(`Redis not ready (connection ${this.client.status})`));
      await this.changes.wait(left);
    }
  }

  serverOf(): string {
    return 'redis';
  }

  async learnAll(deadline: number): Promise<void> {
    await this.runFor(deadline);
  }

  close(): void {
    this.closing = true;
    this.changes.signal();
  }

  /** The run of the current connection: waits for a ready connection and learns its run id. */
  private async runFor(deadline: number): Promise<Run> {
    for (;;) {
      if (this.closing || this.client.status === 'end') throw new StoreUnavailableError('not_ready', 'Redis engine is closed');
      if (this.client.status === 'ready') {
        const run = this.run;
        if (run && run.conn === this.client.stream) return run;
        const conn = this.client.stream;
        try {
          return await beforeDeadline(this.learnRun(), deadline, 'Redis did not tell its run id (INFO server)');
        } catch (err) {
          // An error from this same connection is a real one (INFO denied, or timed out: the
          // user script was not sent either way); otherwise retry.
          if (this.client.stream === conn && this.client.status === 'ready') throw this.notSent(err);
        }
      } else {
        const left = deadline - Date.now();
        if (left <= 0) throw this.fail(notReady(`Redis not ready (connection ${this.client.status})`));
        await this.changes.wait(left);
      }
    }
  }

  private fail<E extends StoreError>(err: E): E {
    this.waits.failed(err);
    return err;
  }

  /** A failure before the user script went out: store trouble is StoreUnavailableError, anything else stays as it is. */
  private notSent(err: unknown): unknown {
    const typed = storeErrorOf(err, { sent: false, sameConnection: true });
    return typed ? this.fail(typed) : err;
  }

  /** INFO server over the current connection; one request per connection at a time. */
  private learnRun(): Promise<Run> {
    const conn = this.client.stream;
    if (this.run?.conn === conn) return Promise.resolve(this.run);
    if (this.learning?.conn === conn) return this.learning.promise;
    const promise = (async (): Promise<Run> => {
      const info = await readRunInfo(this.client);
      // A reply that came back over another connection (INFO resent after a reconnect) says
      // nothing about this one.
      if (this.client.stream !== conn) throw new Error('Redis reconnected while reading its run id');
      const run = { id: runOf(info), conn };
      this.run = run;
      return run;
    })();
    const learning = { conn, promise };
    this.learning = learning;
    const done = (): void => {
      if (this.learning === learning) this.learning = undefined;
    };
    promise.then(done, done);
    return promise;
  }
}

/** A master's run: its node key (`host:port`), run id, and the pool connection it was learned over. */
interface NodeRun extends Run {
  node: string;
  client: Redis;
}

/**
 * Redis Cluster: one run per master. A user's keys live on the master that serves their hash
 * tag's slot, and that master alone can lose them (a crash with AOF everysec, a restart without
 * persistence, a failover to a replica that missed the last writes), so a user's scripts carry
 * the run id of THAT master: the one `cluster.slots` names for the slot of the user's meta key,
 * the same table ioredis routes the script by. The guarantee is then the single-Redis one, per
 * shard: a user's epoch rotates when the node holding the user's keys restarted or was replaced,
 * and only then (users on the other masters keep theirs). One run id for the whole cluster (say,
 * all masters' ids joined) would also be safe, but would rotate every user on any node's restart.
 *
 * Trust, as for one Redis: a reply is accepted when the slot is still served by the same pool
 * connection it was sent to, or when the master serving it now reports the same run id. ioredis
 * never reconnects a pool connection (the cluster drops it and, on MOVED or the next slot
 * refresh, opens a new one) and resends in-flight commands wherever the slot is served then:
 * after a restart, a failover or a slot migration (MOVED), the script may have run on another run
 * with this run's id in its ARGV, and is rejected (outcome unknown, like any command cut off by a
 * disconnect); the user's next script, under the right id, rotates the epoch anyway.
 *
 * A resharding also rotates the epochs of the users it moves (their keys arrive carrying the old
 * master's run id): one snapshot per client, like a restart. Not covered: a script redirected by
 * ASK (mid-migration) runs on the importing node while the slot table still names the old one;
 * that only matters if the importing node also lost writes within the migration window.
 */
export class ClusterRuns implements RunTracker {
  private readonly runs = new Map<string, NodeRun>();
  private readonly learning = new Map<string, { client: Redis; promise: Promise<NodeRun> }>();
  private readonly changes = new Changes();
  private closing = false;

  /**
   * `prepare` runs on each new master connection before its run id is used (the engine loads its
   * scripts there: ioredis counts a script as loaded on a connection once it has sent its EVAL,
   * even when that EVAL failed, e.g. with CLUSTERDOWN from a master that just restarted).
   */
  constructor(
    private readonly cluster: Cluster,
    private readonly prepare: (node: Redis) => Promise<void> = async () => undefined,
    private readonly waits: RunWaits = DEFAULT_WAITS,
  ) {
    for (const event of ['ready', 'refresh', '+node', 'end', 'close']) cluster.on(event, () => this.changes.signal());
    cluster.on('-node', (client: Redis) => {
      for (const [node, run] of this.runs) if (run.client === client) this.runs.delete(node);
      this.changes.signal();
    });
    cluster.on('ready', () => {
      this.learnAll(this.waits.deadline()).catch(() => {}); // a caller that needs one retries and sees the error
    });
    // A master demoted to a replica keeps its pool connection: its run, learned as a master, must
    // not be used again should it be promoted back over that same connection (its replication id
    // changes with the promotion: runOf). Learned again, lazily, once it serves slots.
    cluster.on('refresh', () => {
      const owners = new Set(this.cluster.slots.map((nodes) => nodes?.[0]));
      for (const node of [...this.runs.keys()]) if (!owners.has(node)) this.runs.delete(node);
    });
  }

  userScript(key: string, script: (runId: string) => Promise<Reply>): Promise<Reply> {
    const slot = keySlot(key);
    return retryNotSent(this.waits.deadline(), (deadline) => this.userScriptOnce(slot, script, deadline));
  }

  private async userScriptOnce(slot: number, script: (runId: string) => Promise<Reply>, deadline: number): Promise<Reply> {
    // Known for the slot's master: issue in this same tick (auto-pipelining batches per tick).
    const run = this.current(slot) ?? (await this.runFor(slot, deadline));
    const reply = await script(run.id);
    if (this.current(slot) !== run) {
      // Another connection or another master serves the slot now: the script may have been
      // resent there. Fine only if that one reaches the same run.
      const owner = this.cluster.status === 'ready' ? this.owner(slot) : undefined;
      const now = owner ? await this.learn(owner.node, owner.client).catch(() => undefined) : undefined;
      if (now?.id !== run.id) {
        throw this.fail(new OutcomeUnknownError('untrusted_reply', `${IN_FLIGHT} (Redis Cluster: the master of slot ${slot} changed or reconnected)`));
      }
    }
    return reply;
  }

  connection(key: string): ConnectionRef | undefined {
    if (this.cluster.status !== 'ready') return undefined;
    const owner = this.owner(keySlot(key));
    return owner && owner.client.status === 'ready' ? { id: owner.client.stream, target: owner.node, client: owner.client } : undefined;
  }

  async waitConnection(key: string, deadline: number): Promise<ConnectionRef> {
    const run = await this.runFor(keySlot(key), deadline);
    return { id: run.conn, target: run.node, client: run.client };
  }

  serverOf(key: string): string {
    return this.cluster.slots[keySlot(key)]?.[0] ?? '';
  }

  masters(): Redis[] {
    if (this.cluster.status !== 'ready') throw new Error(`Redis Cluster not ready (${this.cluster.status})`);
    const byKey = new Map(this.cluster.nodes('master').map((n) => [nodeKey(n), n]));
    const out = new Map<string, Redis>();
    for (let slot = 0; slot < SLOTS; slot++) {
      const node = this.cluster.slots[slot]?.[0];
      if (node === undefined) throw new Error(`Redis Cluster: slot ${slot} has no master`);
      if (out.has(node)) continue;
      const client = byKey.get(node);
      if (!client) {
        // Its last connection ended (ioredis does not reconnect pool connections): ask for the
        // slot map, which reconnects the pool to every master it lists; a later call finds it.
        this.cluster.refreshSlotsCache();
        throw new Error(`Redis Cluster: no connection to master ${node}`);
      }
      out.set(node, client);
    }
    return [...out.values()];
  }

  async learnAll(deadline: number): Promise<void> {
    // One slot per master is enough: the run is per master.
    const first = new Map<string, number>();
    for (let slot = 0; slot < SLOTS; slot++) {
      const node = this.cluster.slots[slot]?.[0];
      if (node === undefined) throw new Error(`Redis Cluster: slot ${slot} has no master`);
      if (!first.has(node)) first.set(node, slot);
    }
    await Promise.all([...first.values()].map((slot) => this.runFor(slot, deadline)));
  }

  close(): void {
    this.closing = true;
    this.changes.signal();
  }

  private fail<E extends StoreError>(err: E): E {
    this.waits.failed(err);
    return err;
  }

  /** The master the slot table names for `slot`, if the pool has a live connection to it. */
  private owner(slot: number): { node: string; client: Redis } | undefined {
    const node = this.cluster.slots[slot]?.[0];
    if (node === undefined) return undefined;
    const client = this.cluster.nodes('master').find((n) => nodeKey(n) === node);
    return client && client.status !== 'end' ? { node, client } : undefined;
  }

  /** The known run of the slot's master, if its connection is ready and the one the id was learned over. */
  private current(slot: number): NodeRun | undefined {
    if (this.cluster.status !== 'ready') return undefined;
    const owner = this.owner(slot);
    if (owner?.client.status !== 'ready') return undefined;
    const run = this.runs.get(owner.node);
    return run && run.client === owner.client && run.conn === owner.client.stream ? run : undefined;
  }

  /** Waits until the slot has a reachable master and learns its run id. */
  private async runFor(slot: number, deadline: number): Promise<NodeRun> {
    for (;;) {
      if (this.closing || this.cluster.status === 'end') throw new StoreUnavailableError('not_ready', 'Redis engine is closed');
      const owner = this.cluster.status === 'ready' ? this.owner(slot) : undefined;
      if (owner) {
        try {
          return await beforeDeadline(this.learn(owner.node, owner.client), deadline, `Redis Cluster node ${owner.node} did not tell its run id (INFO server)`);
        } catch (err) {
          // An error from a master that still serves the slot over a ready connection is a real
          // one (e.g. INFO denied); otherwise the topology moved: look again.
          const again = this.owner(slot);
          if (again?.client === owner.client && owner.client.status === 'ready') {
            const typed = storeErrorOf(err, { sent: false, sameConnection: true });
            throw typed ? this.fail(typed) : err;
          }
        }
      } else if (this.cluster.status === 'ready') {
        // The slot's master has no connection (its last one ended): ask for the slot map now
        // rather than at the next periodic refresh; the pool reconnects to what it lists.
        this.cluster.refreshSlotsCache();
      }
      const left = deadline - Date.now();
      if (left <= 0) throw this.fail(notReady(`Redis Cluster: no ready master for slot ${slot} (cluster ${this.cluster.status})`));
      await this.changes.wait(Math.min(left, RETRY_MS));
    }
  }

  /** INFO server on one master's pool connection; one request per connection at a time. */
  private learn(node: string, client: Redis): Promise<NodeRun> {
    const known = this.runs.get(node);
    if (known && known.client === client && known.conn === client.stream && client.status === 'ready') return Promise.resolve(known);
    const inFlight = this.learning.get(node);
    if (inFlight?.client === client) return inFlight.promise;
    const promise = (async (): Promise<NodeRun> => {
      await whenReady(client); // pool connections are lazy: this may be the first command
      const conn = client.stream;
      const info = await readRunInfo(client);
      await this.prepare(client);
      if (client.stream !== conn || client.status !== 'ready') throw new Error(`Redis Cluster node ${node} reconnected while reading its run id`);
      const run: NodeRun = { node, id: runOf(info), conn, client };
      this.runs.set(node, run);
      return run;
    })();
    const learning = { client, promise };
    this.learning.set(node, learning);
    const done = (): void => {
      if (this.learning.get(node) === learning) this.learning.delete(node);
    };
    promise.then(done, done);
    return promise;
  }
}

const SLOTS = 16_384;

function notReady(what: string): StoreUnavailableError {
  return new StoreUnavailableError('not_ready', `${what}; gave up waiting within the store timeout, nothing was sent`);
}
/** Bound on one wait for a topology change before looking again. */
const RETRY_MS = 100;

/** The pool's key of a cluster node connection (ioredis: `host:port`, as in `cluster.slots`). */
function nodeKey(client: Redis): string {
  return `${client.options.host}:${client.options.port}`;
}

/** Connects a lazy connection; resolves when it is ready, rejects when it ends first. */
async function whenReady(client: Redis): Promise<void> {
  if (client.status === 'ready') return;
  if (client.status === 'end') throw new Error('connection closed');
  if (client.status === 'wait') {
    await client.connect();
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const onReady = (): void => {
      client.off('end', onEnd);
      resolve();
    };
    const onEnd = (): void => {
      client.off('ready', onReady);
      reject(new Error('connection closed'));
    };
    client.once('ready', onReady);
    client.once('end', onEnd);
  });
}

/** A promise replaced every time something changed; waiters wake and look again. */
class Changes {
  private current = deferred();

  signal(): void {
    const changed = this.current;
    this.current = deferred();
    changed.resolve();
  }

  /** Resolves at the next change or after `ms`, whichever comes first. */
  async wait(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([this.current.promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    } finally {
      clearTimeout(timer);
    }
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
