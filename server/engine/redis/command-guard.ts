import { OutcomeUnknownError, StoreError } from '../store-errors.js';
import type { StoreHealth } from '../store-health.js';
import { storeErrorOf } from './driver-errors.js';
import { ReplyWatch } from './reply-watch.js';
import { type ConnectionRef, type RunTracker, type RunWaits, retryNotSent } from './runs.js';
import { SCRIPTS } from './scripts.js';

/**
 * The choke point of every command the Redis engine sends. Each one:
 *
 * - goes out only over a ready connection to the server holding its key, waiting for one until
 *   the store deadline (the offline queue of a single Redis is off: nothing waits in the driver,
 *   and nothing waiting there is sent after the caller was told it failed);
 * - fails with a typed store error (driver-errors.ts): not applied, or outcome unknown; and
 *   with a timeout once its server sent no reply for the store timeout (reply-watch.ts);
 * - reports replies and timeouts to StoreHealth, per target.
 *
 * - with `replicas` (REDIS_WAIT_REPLICAS), is a write only once that many replicas have it: see
 *   `replicated`.
 *
 * It wraps the client rather than each engine method, so every command a script or method adds
 * later is covered as well.
 */
export class CommandGuard {
  /** Per server address: its StoreHealth name (built once, not per command) and its reply watch. */
  private readonly servers = new Map<string, { target: string; watch: ReplyWatch }>();

  constructor(
    private readonly runs: RunTracker,
    private readonly waits: RunWaits,
    private readonly health: StoreHealth,
    /** StoreHealth's name of a server: `engine@host:port`. */
    private readonly targetOf: (address: string) => string,
    private readonly timeoutMs: number,
    /** Replicas every write must reach before its reply is handed on, and how long WAIT may take. */
    private readonly replicas?: { count: number; timeoutMs: number },
  ) {}

  /**
   * `resend`: a command that was not sent (its connection was closing) goes again over the next
   * one. Not for the scripts that carry a run id: the run tracker resends those itself, with the
   * run id of the new connection.
   */
  run<T>(key: string, issue: () => Promise<T>, resend: boolean, write = false): Promise<T> {
    const wait = write && this.replicas !== undefined && this.replicas.count > 0;
    const once = (deadline: number): Promise<T> => {
      const ready = this.runs.connection(key);
      // Ready: issue in this same tick, so auto-pipelining still batches a flush's commands.
      if (ready) return wait ? this.issueReplicated(key, ready, issue) : this.issue(key, ready, issue);
      return this.runs.waitConnection(key, deadline).then((conn) => (wait ? this.issueReplicated(key, conn, issue) : this.issue(key, conn, issue)));
    };
    const deadline = this.waits.deadline();
    return resend ? retryNotSent(deadline, once) : once(deadline);
  }

  private server(conn: ConnectionRef): { target: string; watch: ReplyWatch } {
    let server = this.servers.get(conn.target);
    if (!server) {
      server = { target: this.targetOf(conn.target), watch: new ReplyWatch(this.timeoutMs) };
      this.servers.set(conn.target, server);
    }
    return server;
  }

  /** The write, then `replicated`: its reply is handed on only once enough replicas have it. */
  private async issueReplicated<T>(key: string, conn: ConnectionRef, issue: () => Promise<T>): Promise<T> {
    const reply = await this.issue(key, conn, issue);
    // This runs in the microtasks of the reply's own socket read (no timer, no I/O in between):
    // the connection serving the key now is the one the reply came back over.
    await this.replicated(key, conn);
    return reply;
  }

  /**
   * WAIT on the connection that wrote, its reply checked. Redis counts the replicas that have
   * acknowledged everything THIS connection wrote before the WAIT, so it vouches for the write
   * only if the write went out, came back and the WAIT went out and came back over the one
   * connection `conn`; after a reconnect (or a Cluster redirect) in between it would vouch for
   * nothing, and the write is reported as outcome unknown. So is a shortfall: the master has the
   * write, but a failover now may lose it (a retry is safe and is acknowledged once replicas have
   * it). One WAIT covers all the writes of its connection before it: the WAITs of one flush after
   * the first return at once.
   */
  private async replicated(key: string, conn: ConnectionRef): Promise<void> {
    const replicas = this.replicas;
    if (!replicas) return;
    const { target, watch } = this.server(conn);
    const unknown = (why: string, cause?: unknown): OutcomeUnknownError => {
      const err = new OutcomeUnknownError(
        'noreplicas',
        `the write reached the master but ${why}; it may or may not survive a failover`,
        cause === undefined ? {} : { cause },
      );
      this.health.failed(err);
      return err;
    };
    if (this.runs.connection(key)?.id !== conn.id) throw unknown('its connection changed before WAIT could vouch for it');
    let acked: number;
    try {
      acked = await watch.track(() => conn.client.wait(replicas.count, replicas.timeoutMs));
    } catch (err) {
      throw unknown(`WAIT failed (${err instanceof Error ? err.message : String(err)})`, err);
    }
    if (this.runs.connection(key)?.id !== conn.id) throw unknown('its connection changed while WAIT was in flight');
    if (acked < replicas.count)
      throw unknown(`only ${acked} of ${replicas.count} replicas acknowledged it within ${replicas.timeoutMs} ms (REDIS_WAIT_REPLICAS)`);
    this.health.answered(target);
  }

  private async issue<T>(key: string, conn: ConnectionRef, issue: () => Promise<T>): Promise<T> {
    const { target, watch } = this.server(conn);
    try {
      const reply = await watch.track(issue);
      this.health.answered(target);
      return reply;
    } catch (err) {
      const typed = err instanceof StoreError ? err : storeErrorOf(err, { sent: true, sameConnection: this.runs.connection(key)?.id === conn.id });
      if (!typed) throw err;
      if (typed.kind === 'timeout') this.health.timedOut(target, this.timeoutMs);
      this.health.failed(typed);
      throw typed;
    }
  }
}

/**
 * Scripts whose replies acknowledge no change to anyone (SCRIPTS[...].read), so they never WAIT:
 * reads (which may keep a user's epoch), and the durable tier's own bookkeeping, where a step a
 * failover loses is only done again (a dirty mark that comes back is upserted again; a cold user
 * whose eviction is lost stays in Redis), and the badge hook's (a lost release delivers an event
 * again: at-least-once). A restore does WAIT, and is in any case covered by the
 * WAIT of the request's own write on the same connection after it.
 */
const READ_SCRIPTS = new Set(Object.entries(SCRIPTS).flatMap(([name, spec]) => ('read' in spec ? [name] : [])));

/** Redis commands that only read. */
const READ_COMMANDS = new Set(
  (
    'get mget strlen getrange exists type ttl pttl expiretime pexpiretime dbsize randomkey keys scan hget hmget hgetall hexists hkeys hvals hlen hstrlen ' +
    'hscan hrandfield llen lrange lindex lpos scard smembers sismember smismember srandmember sscan sinter sunion sdiff zcard zscore zmscore zrange ' +
    'zrangebyscore zrevrange zrevrangebyscore zrank zrevrank zcount zlexcount zscan xlen xrange xrevrange xread xinfo pfcount bitcount getbit ' +
    'object memory time lastsave role wait waitaof'
  ).split(' '),
);

/** Commands that manage the connection itself, not data: never guarded (the engine closes and probes with them). */
const UNGUARDED = new Set([
  'quit',
  'ping',
  'info',
  'script',
  'cluster',
  'client',
  'config',
  'select',
  'auth',
  'hello',
  'readonly',
  'readwrite',
  'monitor',
  'subscribe',
  'psubscribe',
  'ssubscribe',
  'unsubscribe',
  'punsubscribe',
  'sunsubscribe',
  'multi',
  'exec',
  'discard',
  'watch',
  'unwatch',
  'reset',
  'shutdown',
  'debug',
  'echo',
]);

/**
 * `client` with every data command (each Redis command, in its plain and Buffer form, and every
 * script of scripts.ts) going through `guard`, keyed by its first argument. Everything else
 * (status, events, quit) is the client's own.
 */
export function guardCommands<C extends { getBuiltinCommands(): string[] }>(client: C, guard: CommandGuard): C {
  const names = new Set<string>();
  for (const name of [...client.getBuiltinCommands(), ...Object.keys(SCRIPTS)]) {
    if (UNGUARDED.has(name)) continue;
    names.add(name);
    names.add(`${name}Buffer`);
  }
  // Writes whose reply acknowledges a change to a caller: with REDIS_WAIT_REPLICAS they wait for
  // replicas. Every script but those that only read (a pull's epoch and trim bookkeeping is
  // repeated by the next pull, never acknowledged), and every command not known to only read
  // (one WAIT too many costs a round trip; one too few, a false acknowledgement).
  const writes = new Set<string>();
  for (const name of names) {
    const plain = name.endsWith('Buffer') ? name.slice(0, -'Buffer'.length) : name;
    if (name in SCRIPTS || plain in SCRIPTS ? !READ_SCRIPTS.has(plain) : !READ_COMMANDS.has(plain)) writes.add(name);
  }
  // The user scripts carry a run id: RunTracker.userScript resends them.
  const withRunId = new Set<string>();
  for (const [name, spec] of Object.entries(SCRIPTS)) if ('user' in spec) withRunId.add(name).add(`${name}Buffer`);
  const wrapped = new Map<string | symbol, unknown>();
  return new Proxy(client, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (typeof value !== 'function') return value;
      let fn = wrapped.get(prop);
      if (fn) return fn;
      const command = value as (...args: unknown[]) => Promise<unknown>;
      if (typeof prop === 'string' && names.has(prop)) {
        const resend = !withRunId.has(prop);
        const write = writes.has(prop);
        fn = (...args: unknown[]) => {
          const key = args[0];
          const slotKey = typeof key === 'string' ? key : Buffer.isBuffer(key) ? key.toString() : '';
          return guard.run(slotKey, () => command.apply(target, args), resend, write);
        };
      } else {
        // Everything else runs on the client itself: a method called with the proxy as `this`
        // would hand it to ioredis (a pipeline built on the proxy calls the guard from inside
        // auto-pipelining, which calls the pipeline again: no end).
        fn = command.bind(target);
      }
      wrapped.set(prop, fn);
      return fn;
    },
  });
}
