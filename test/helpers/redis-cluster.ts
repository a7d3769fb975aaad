import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import { keySlot } from '../../server/engine/redis/keys.js';
import type { RedisNodeAddress } from '../../server/redis-target.js';
import { freePort, keepOutput, killOnExit, stopProcess, waitForExit } from './processes.js';
import { findOnPath, REDIS_NOT_FOUND, type RedisServer, startRedisServer, type TlsFiles } from './redis-server.js';

/**
 * A private Redis Cluster for one test file: N masters (3 by default), optionally with replicas,
 * each a `redis-server` of test/helpers/redis-server.ts (own port, own temp dir, never 6379)
 * with `cluster-enabled yes`, joined by `redis-cli --cluster create`. Missing redis-server or
 * redis-cli fails the suite, it never skips.
 */
export interface RedisCluster {
  /** Every node, masters first as created (`nodeIndexOf` maps a key to the master that served it at creation). */
  readonly nodes: readonly RedisServer[];
  readonly addresses: readonly RedisNodeAddress[];
  /** The REDIS_CLUSTER_NODES value: every master as `127.0.0.1:port`, comma-separated. */
  readonly seeds: string;
  /** Index into `nodes` of the master serving `key`'s slot (hash tags apply, as in Redis). */
  nodeIndexOf(key: string): number;
  /**
   * Restarts one master in place (same port, dir and nodes.conf, so the same slots): SIGTERM, or
   * SIGKILL with `crash`. Without AOF (the default) its data is gone. Resolves once every node
   * reports `cluster_state:ok` again, or with `untilOk: false` as soon as it answers PING (for
   * about 2 s more it refuses keyed commands with CLUSTERDOWN while the cluster takes it back).
   */
  restartNode(index: number, options?: { crash?: boolean; untilOk?: boolean }): Promise<void>;
  /** The node serving `key`'s slot now, asked of the live nodes (CLUSTER SLOTS). */
  masterOf(key: string): Promise<RedisServer>;
  /** Resolves once `key`'s slot is served by a node other than `old` and every live node says `cluster_state:ok`. */
  waitFailover(key: string, old: RedisServer, timeoutMs?: number): Promise<RedisServer>;
  /** A plain connection to a node (with the cluster's credentials and TLS), for probes. */
  probe(node: RedisServer): Redis;
  /** Resolves once every node reports `cluster_state:ok` (after a `restartNode` with `untilOk: false`). */
  waitOk(): Promise<void>;
  /** Stops every node and removes their temp dirs. */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  masters?: number;
  /** Replicas per master (0 by default). */
  replicas?: number;
  /** cluster-node-timeout once joined (5000 by default): how soon a dead master's replica takes over. */
  nodeTimeoutMs?: number;
  /** Bound on `redis-cli --cluster create` and on each wait for `cluster_state:ok`. */
  timeoutMs?: number;
  /** Every node requires this password (`requirepass` and `masterauth`)... */
  password?: string;
  /** ...as this ACL user instead of `default`. */
  username?: string;
  /** TLS only, for clients, replication and the cluster bus. */
  tls?: TlsFiles;
}

export const REDIS_CLI_NOT_FOUND =
  'redis-cli not found on PATH: install it (apt-get install -y redis-server, or redis-tools) — the Redis Cluster tests never skip';

const POLL_INTERVAL_MS = 25;

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  if (!findOnPath('redis-server')) throw new Error(REDIS_NOT_FOUND);
  const cli = findOnPath('redis-cli');
  if (!cli) throw new Error(REDIS_CLI_NOT_FOUND);
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  const timeoutMs = options.timeoutMs ?? 20_000;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? NODE_TIMEOUT_MS;
  const { password, username, tls } = options;
  const access: RedisOptions = {
    ...(tls ? { tls: { ca: readFileSync(tls.ca) } } : {}),
    ...(username !== undefined ? { username } : {}),
    ...(password !== undefined ? { password } : {}),
  };
  const auth: string[] = [];
  if (password !== undefined) {
    auth.push(
      ...(username !== undefined
        ? [`user ${username} on >${password} ~* &* +@all`, 'user default off', `masteruser ${username}`]
        : [`requirepass ${password}`]),
      `masterauth ${password}`,
    );
  }
  const cliAccess = [
    ...(tls ? ['--tls', '--cacert', tls.ca] : []),
    ...(username !== undefined ? ['--user', username] : []),
    ...(password !== undefined ? ['-a', password, '--no-auth-warning'] : []),
  ];
  const nodeOptions = {
    ...(tls ? { tls } : {}),
    ...(password !== undefined ? { password: username !== undefined ? `${username} ${password}` : password } : {}),
    // A replica that (re)joins is synced at once, not after diskless sync's default 5 s wait for
    // more replicas: with REDIS_WAIT_REPLICAS its master takes no write until then.
    extraConfig: [...auth, 'repl-diskless-sync-delay 0', ...(tls ? ['tls-cluster yes'] : [])],
  };

  const started = await Promise.allSettled(Array.from({ length: masters * (1 + replicas) }, () => startClusterNode(nodeOptions)));
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const stop = async (): Promise<void> => {
    await Promise.allSettled(nodes.map((n) => n.stop()));
  };
  let owners: Uint16Array;
  try {
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    await createCluster(cli, nodes, replicas, cliAccess, timeoutMs);
    await waitClusterOk(nodes, timeoutMs, access);
    await Promise.all(nodes.map((n) => settle(n.port, access, nodeTimeoutMs)));
    if (replicas > 0) await waitReplicasSynced(nodes, masters * replicas, timeoutMs, access);
    owners = await slotOwners(nodes, access);
  } catch (err) {
    await stop();
    throw err;
  }

  const addresses = nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  const cluster: RedisCluster = {
    nodes,
    addresses,
    seeds: addresses.map((a) => `${a.host}:${a.port}`).join(','),
    nodeIndexOf: (key) => owners[keySlot(key)] ?? 0,
    async restartNode(index, opts = {}) {
      const node = nodes[index];
      if (!node) throw new Error(`no cluster node ${index}`);
      if (opts.crash) await node.kill();
      await node.restart();
      await settle(node.port, access, nodeTimeoutMs);
      if (opts.untilOk !== false) await waitClusterOk(nodes, timeoutMs, access);
    },
    async masterOf(key) {
      const slot = keySlot(key);
      for (const node of nodes.filter((n) => n.pid() !== undefined)) {
        const ranges = await withNode(node.port, (r) => r.cluster('SLOTS'), access).catch(() => undefined);
        const range = ranges?.find(([from, to]) => slot >= from && slot <= to);
        const owner = nodes.find((n) => n.port === range?.[2]?.[1]);
        if (owner) return owner;
      }
      throw new Error(`no live node names a master for slot ${slot}`);
    },
    async waitFailover(key, old, waitMs = 30_000) {
      const deadline = Date.now() + waitMs;
      for (;;) {
        const live = nodes.filter((n) => n.pid() !== undefined && n !== old);
        const owner = await cluster.masterOf(key).catch(() => undefined);
        const infos = await Promise.all(live.map((n) => withNode(n.port, (r) => r.cluster('INFO') as Promise<string>, access).catch(() => '')));
        if (owner && owner !== old && infos.every((i) => /^cluster_state:ok\r?$/m.test(i))) return owner;
        if (Date.now() > deadline) throw new Error(`no failover of ${old.port} within ${waitMs} ms (owner ${owner?.port})`);
        await delay(POLL_INTERVAL_MS * 2);
      }
    },
    probe(node) {
      const r = new Redis({ host: '127.0.0.1', port: node.port, ...access });
      r.on('error', () => undefined);
      return r;
    },
    waitOk: () => waitClusterOk(nodes, timeoutMs),
    stop,
  };
  return cluster;
}

/**
 * Nodes start with a short cluster-node-timeout: they ping each other more often, so gossip
 * converges and `--cluster create` returns in about a second instead of two to five.
 */
const JOIN_NODE_TIMEOUT_MS = 1_000;
/** Once joined, a longer one: a node slowed down by a busy test machine is not declared failed. */
const NODE_TIMEOUT_MS = 5_000;

/** A redis-server in cluster mode. Its bus port is picked too: port + 10000 may exceed 65535. */
async function startClusterNode(options: { tls?: TlsFiles; password?: string; extraConfig: readonly string[] }): Promise<RedisServer> {
  const busPort = await freePort();
  return startRedisServer({
    ...options,
    extraConfig: [
      'cluster-enabled yes',
      'cluster-config-file nodes.conf',
      `cluster-port ${busPort}`,
      `cluster-node-timeout ${JOIN_NODE_TIMEOUT_MS}`,
      ...options.extraConfig,
    ],
  });
}

async function settle(port: number, access: RedisOptions, nodeTimeoutMs: number): Promise<void> {
  await withNode(port, (r) => r.config('SET', 'cluster-node-timeout', String(nodeTimeoutMs)), access);
}

/** Every replica has finished its first sync (a failover before that would promote an empty one). */
async function waitReplicasSynced(nodes: readonly RedisServer[], expected: number, timeoutMs: number, access: RedisOptions): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const infos = await Promise.all(nodes.map((n) => withNode(n.port, (r) => r.info('replication'), access).catch(() => '')));
    const synced = infos.filter((i) => /^role:slave\r?$/m.test(i) && /^master_link_status:up\r?$/m.test(i)).length;
    if (synced >= expected) return;
    if (Date.now() > deadline) throw new Error(`only ${synced} of ${expected} cluster replicas synced within ${timeoutMs} ms`);
    await delay(POLL_INTERVAL_MS * 2);
  }
}

async function createCluster(cli: string, nodes: readonly RedisServer[], replicas: number, access: readonly string[], timeoutMs: number): Promise<void> {
  const args = [...access, '--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', String(replicas), '--cluster-yes'];
  const proc = spawn(cli, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = keepOutput(proc);
  killOnExit(proc);
  if (!(await waitForExit(proc, timeoutMs))) {
    await stopProcess(proc, 'SIGKILL', 1_000);
    throw new Error(`redis-cli --cluster create did not finish within ${timeoutMs} ms:\n${output()}`);
  }
  if (proc.exitCode !== 0) throw new Error(`redis-cli --cluster create failed (${proc.exitCode ?? proc.signalCode}):\n${output()}`);
}

/** Runs `fn` with a plain connection to one node that gives up at once instead of reconnecting. */
async function withNode<T>(port: number, fn: (r: Redis) => Promise<T>, access: RedisOptions = {}): Promise<T> {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, connectTimeout: 2_000, ...access });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

/** Every node knows every other node, sees all 16384 slots served and says `cluster_state:ok`. */
async function waitClusterOk(nodes: readonly RedisServer[], timeoutMs: number, access: RedisOptions = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const infos = await Promise.all(
      nodes.map((n) => withNode(n.port, (r) => r.cluster('INFO') as Promise<string>, access).catch((err: Error) => `error: ${err.message}`)),
    );
    const ok = (info: string): boolean =>
      /^cluster_state:ok\r?$/m.test(info) &&
      /^cluster_slots_ok:16384\r?$/m.test(info) &&
      new RegExp(`^cluster_known_nodes:${nodes.length}\\r?$`, 'm').test(info);
    if (infos.every(ok)) return;
    last = infos.map((info, i) => `node ${nodes[i]?.port}: ${info.split(/\r?\n/).slice(0, 4).join(' ')}`).join('\n');
    if (Date.now() > deadline) throw new Error(`Redis Cluster not ok within ${timeoutMs} ms:\n${last}`);
    await delay(POLL_INTERVAL_MS);
  }
}

/** For each slot, the index of the node serving it (CLUSTER SLOTS, as the cluster itself sees it). */
async function slotOwners(nodes: readonly RedisServer[], access: RedisOptions = {}): Promise<Uint16Array> {
  const first = nodes[0];
  if (!first) throw new Error('a cluster needs at least one node');
  const ranges = await withNode(first.port, (r) => r.cluster('SLOTS'), access);
  const owners = new Uint16Array(16_384);
  for (const [from, to, master] of ranges) {
    const port = master?.[1];
    const index = nodes.findIndex((n) => n.port === port);
    if (index < 0) throw new Error(`CLUSTER SLOTS names port ${port}, not one of ours`);
    owners.fill(index, from, to + 1);
  }
  return owners;
}
