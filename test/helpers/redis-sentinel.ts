import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import type { RedisNodeAddress } from '../../server/redis-target.js';
import { type RedisServer, startRedisServer, type TlsFiles } from './redis-server.js';

/**
 * A private Sentinel deployment for one test file: a master, its replicas and three Sentinels
 * (`redis-server <conf> --sentinel`), each a redis-server of redis-server.ts (own port, own temp
 * dir, never 6379). The Sentinels watch the master as `mymaster` with a short
 * `down-after-milliseconds`, so a killed master is replaced within a few seconds. Missing
 * redis-server fails the suite, it never skips.
 */
/** Forced failovers asked for at most, and how long each may take to name a new master (a caller's test timeout must cover both). */
const FORCED_FAILOVER_ATTEMPTS = 3;
const FORCED_FAILOVER_WAIT_MS = 25_000;

export interface SentinelDeployment {
  readonly name: string;
  /** Every data node: [0] is the first master; who is master now is `master()`. */
  readonly nodes: readonly RedisServer[];
  readonly sentinels: readonly RedisServer[];
  /** The REDIS_SENTINELS value. */
  readonly sentinelList: string;
  readonly sentinelAddresses: readonly RedisNodeAddress[];
  /** The data node the Sentinels name as master now (asked of the first that answers). */
  master(): Promise<RedisServer>;
  /** Resolves once every Sentinel names a master other than `old` and that node says `role:master`. */
  waitNewMaster(old: RedisServer, timeoutMs?: number): Promise<RedisServer>;
  /** Resolves once `node` replicates from the current master (`master_link_status:up`). */
  waitReplica(node: RedisServer, timeoutMs?: number): Promise<void>;
  /** SENTINEL FAILOVER away from `old` (the master now); resolves with the promoted node once every Sentinel names it. */
  forceFailover(old: RedisServer): Promise<RedisServer>;
  /** A plain connection to a data node (with the deployment's credentials), for probes. */
  probe(node: RedisServer): Redis;
  stop(): Promise<void>;
}

export interface SentinelOptions {
  replicas?: number;
  downAfterMs?: number;
  /** Data nodes and Sentinels require this password (`requirepass`, `masterauth`, Sentinel's `auth-pass`). */
  password?: string;
  /** ...as this ACL user (`user <name> on >password ~* &* +@all`) instead of `default`. */
  username?: string;
  /** Sentinels require their own password (Sentinel's `requirepass`). */
  sentinelPassword?: string;
  /** TLS only, for data nodes, replication and Sentinels. */
  tls?: TlsFiles;
  /** More redis.conf lines for the data nodes (e.g. `appendonly yes`). */
  nodeConfig?: readonly string[];
}

const NAME = 'mymaster';
const POLL_MS = 50;

export async function startSentinel(options: SentinelOptions = {}): Promise<SentinelDeployment> {
  const replicas = options.replicas ?? 1;
  const downAfterMs = options.downAfterMs ?? 1_000;
  const { password, username, tls } = options;
  // A replica that (re)joins is synced at once, not after diskless sync's default 5 s wait for
  // more replicas: with REDIS_WAIT_REPLICAS its master takes no write until then.
  const auth: string[] = ['repl-diskless-sync-delay 0'];
  if (password !== undefined) {
    if (username !== undefined) {
      // The replicas and Sentinels log in as the same user; `default` is switched off.
      auth.push(`user ${username} on >${password} ~* &* +@all`, 'user default off', `masteruser ${username}`, `masterauth ${password}`);
    } else {
      auth.push(`requirepass ${password}`, `masterauth ${password}`);
    }
  }
  const nodes: RedisServer[] = [];
  const sentinels: RedisServer[] = [];
  const stop = async (): Promise<void> => {
    await Promise.allSettled([...sentinels, ...nodes].map((s) => s.stop()));
  };
  const common = { ...(tls ? { tls } : {}), ...(password !== undefined ? { password: username !== undefined ? `${username} ${password}` : password } : {}) };
  try {
    const first = await startRedisServer({ ...common, extraConfig: [...auth, ...(options.nodeConfig ?? [])] });
    nodes.push(first);
    nodes.push(
      ...(await Promise.all(
        Array.from({ length: replicas }, () =>
          startRedisServer({ ...common, extraConfig: [...auth, ...(options.nodeConfig ?? []), `replicaof 127.0.0.1 ${first.port}`] }),
        ),
      )),
    );
    const sentinelConfig = [
      `sentinel monitor ${NAME} 127.0.0.1 ${first.port} 2`,
      `sentinel down-after-milliseconds ${NAME} ${downAfterMs}`,
      `sentinel failover-timeout ${NAME} 10000`,
      `sentinel parallel-syncs ${NAME} 1`,
      ...(username !== undefined ? [`sentinel auth-user ${NAME} ${username}`] : []),
      ...(password !== undefined ? [`sentinel auth-pass ${NAME} ${password}`] : []),
      ...(options.sentinelPassword !== undefined ? [`requirepass ${options.sentinelPassword}`, `sentinel sentinel-pass ${options.sentinelPassword}`] : []),
    ];
    sentinels.push(
      ...(await Promise.all(
        Array.from({ length: 3 }, () =>
          startRedisServer({
            ...(tls ? { tls } : {}),
            ...(options.sentinelPassword !== undefined ? { password: options.sentinelPassword } : {}),
            args: ['--sentinel'],
            extraConfig: sentinelConfig,
          }),
        ),
      )),
    );
  } catch (err) {
    await stop();
    throw err;
  }

  const tlsOptions = tls ? { tls: { ca: readCa(tls) } } : {};
  const nodeOptions: RedisOptions = {
    ...tlsOptions,
    ...(username !== undefined ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
  };
  const sentinelOptions: RedisOptions = { ...tlsOptions, ...(options.sentinelPassword !== undefined ? { password: options.sentinelPassword } : {}) };
  const once = async <T>(port: number, extra: RedisOptions, fn: (r: Redis) => Promise<T>): Promise<T> => {
    const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, connectTimeout: 1_000, ...extra });
    r.on('error', () => undefined);
    try {
      await r.connect();
      return await fn(r);
    } finally {
      r.disconnect();
    }
  };
  const namedMasters = (): Promise<(number | undefined)[]> =>
    Promise.all(
      sentinels.map((s) =>
        once(s.port, sentinelOptions, async (r) => Number(((await r.call('SENTINEL', 'get-master-addr-by-name', NAME)) as string[])[1])).catch(() => undefined),
      ),
    );
  const role = (node: RedisServer): Promise<string> =>
    once(node.port, nodeOptions, (r) => r.info('replication')).catch((err: Error) => `error: ${err.message}`);
  const byPort = (port: number | undefined): RedisServer | undefined => nodes.find((n) => n.port === port);

  const deployment: SentinelDeployment = {
    name: NAME,
    nodes,
    sentinels,
    sentinelList: sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
    sentinelAddresses: sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
    async master() {
      for (const port of await namedMasters()) {
        const node = byPort(port);
        if (node) return node;
      }
      throw new Error('no Sentinel names a master');
    },
    // Sentinel's detection and election took more than 20 s with two full suites running at load 10.
    async waitNewMaster(old, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      let last: (number | undefined)[] = [];
      for (;;) {
        last = await namedMasters();
        const node = byPort(last[0]);
        if (node && node !== old && last.every((p) => p === node.port) && /^role:master\r?$/m.test(await role(node))) return node;
        if (Date.now() > deadline) throw new Error(`no new master within ${timeoutMs} ms (Sentinels name ports ${last.join(', ')}; old ${old.port})`);
        await delay(POLL_MS);
      }
    },
    async waitReplica(node, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const info = await role(node);
        if (/^role:slave\r?$/m.test(info) && /^master_link_status:up\r?$/m.test(info)) return;
        if (Date.now() > deadline) throw new Error(`node ${node.port} did not become a replica within ${timeoutMs} ms:\n${info}`);
        await delay(POLL_MS);
      }
    },
    async forceFailover(old) {
      // A failover just before this one may have left its old master still syncing as a replica:
      // a forced failover that picks it aborts when it cannot be promoted.
      for (const node of nodes) if (node !== old) await deployment.waitReplica(node);
      // Sentinel tries a forced failover once: one that aborted (its replica not promoted within
      // the failover-timeout) is not retried, so it is asked again.
      for (let attempt = 1; ; attempt++) {
        // Until Sentinel counts the previous failover finished, it refuses another (INPROG); a
        // master it demoted counts as a replica to promote only once Sentinel has read its INFO as
        // one (every 10 s), until then NOGOODSLAVE (a failover back to it).
        for (const deadline = Date.now() + 30_000; ; ) {
          const asked = await once(sentinels[0]?.port ?? 0, sentinelOptions, (r) => r.call('SENTINEL', 'FAILOVER', NAME)).then(
            () => null,
            (err: unknown) => err,
          );
          if (asked === null) break;
          if (!/INPROG|NOGOODSLAVE/.test(String(asked)) || Date.now() > deadline) throw asked;
          await delay(250);
        }
        try {
          return await deployment.waitNewMaster(old, FORCED_FAILOVER_WAIT_MS);
        } catch (err) {
          if (attempt >= FORCED_FAILOVER_ATTEMPTS) throw err;
        }
      }
    },
    probe(node) {
      const r = new Redis({ host: '127.0.0.1', port: node.port, ...nodeOptions });
      r.on('error', () => undefined);
      return r;
    },
    stop,
  };
  try {
    // Replicas done with their first sync (WAIT counts only those), then Sentinels that know them.
    await Promise.all(nodes.slice(1).map((n) => deployment.waitReplica(n)));
    await waitDiscovered(deployment, once, sentinelOptions, replicas);
  } catch (err) {
    await stop();
    throw err;
  }
  return deployment;
}

/**
 * Sentinels learn of the replicas (from the master's INFO) and of each other (hello messages
 * every 2 s) after they start: a failover before that would find no replica, or no quorum.
 */
async function waitDiscovered(
  d: SentinelDeployment,
  once: <T>(port: number, extra: RedisOptions, fn: (r: Redis) => Promise<T>) => Promise<T>,
  sentinelOptions: RedisOptions,
  replicas: number,
): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const views = await Promise.all(
      d.sentinels.map((s) =>
        once(s.port, sentinelOptions, async (r) => {
          const master = (await r.call('SENTINEL', 'master', NAME)) as string[];
          const field = (name: string): number => Number(master[master.indexOf(name) + 1]);
          return { replicas: field('num-slaves'), others: field('num-other-sentinels') };
        }).catch(() => ({ replicas: -1, others: -1 })),
      ),
    );
    if (views.every((v) => v.replicas >= replicas && v.others >= d.sentinels.length - 1)) return;
    if (Date.now() > deadline) throw new Error(`Sentinels did not discover the deployment within 30 s: ${JSON.stringify(views)}`);
    await delay(POLL_MS * 4);
  }
}

function readCa(tls: TlsFiles): Buffer {
  return readFileSync(tls.ca);
}
