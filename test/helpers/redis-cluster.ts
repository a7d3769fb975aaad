import { spawn } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { keySlot } from '../../server/engine/redis/keys.js';
import type { RedisNodeAddress } from '../../server/redis-target.js';
import { freePort, keepOutput, killOnExit, stopProcess, waitForExit } from './processes.js';
import { findOnPath, REDIS_NOT_FOUND, startRedisServer, type RedisServer } from './redis-server.js';

/**
 * A private Redis Cluster for one test file: N masters (3 by default), no replicas, each a
 * `redis-server` of test/helpers/redis-server.ts (own port, own temp dir, never 6379) with
 * `cluster-enabled yes`, joined by `redis-cli --cluster create`. Missing redis-server or
 * redis-cli fails the suite, it never skips.
 */
export interface RedisCluster {
  /** The masters; `nodes[i]` serves the slots `nodeIndexOf` maps to `i`. */
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
  /** Resolves once every node reports `cluster_state:ok` (after a `restartNode` with `untilOk: false`). */
  waitOk(): Promise<void>;
  /** Stops every node and removes their temp dirs. */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  masters?: number;
  /** Bound on `redis-cli --cluster create` and on each wait for `cluster_state:ok`. */
  timeoutMs?: number;
}

export const REDIS_CLI_NOT_FOUND =
  'redis-cli not found on PATH: install it (apt-get install -y redis-server, or redis-tools) — the Redis Cluster tests never skip';

const POLL_INTERVAL_MS = 25;

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  if (!findOnPath('redis-server')) throw new Error(REDIS_NOT_FOUND);
  const cli = findOnPath('redis-cli');
  if (!cli) throw new Error(REDIS_CLI_NOT_FOUND);
  const masters = options.masters ?? 3;
  const timeoutMs = options.timeoutMs ?? 20_000;

  const started = await Promise.allSettled(Array.from({ length: masters }, () => startClusterNode()));
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const stop = async (): Promise<void> => {
    await Promise.allSettled(nodes.map((n) => n.stop()));
  };
  let owners: Uint16Array;
  try {
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    await createCluster(cli, nodes, timeoutMs);
    await waitClusterOk(nodes, timeoutMs);
    await Promise.all(nodes.map((n) => settle(n.port)));
    owners = await slotOwners(nodes);
  } catch (err) {
    await stop();
    throw err;
  }

  const addresses = nodes.map((n) => ({ host: '127.0.0.1', port: n.port }));
  return {
    nodes,
    addresses,
    seeds: addresses.map((a) => `${a.host}:${a.port}`).join(','),
    nodeIndexOf: (key) => owners[keySlot(key)] ?? 0,
    async restartNode(index, opts = {}) {
      const node = nodes[index];
      if (!node) throw new Error(`no cluster node ${index}`);
      if (opts.crash) await node.kill();
      await node.restart();
      await settle(node.port);
      if (opts.untilOk !== false) await waitClusterOk(nodes, timeoutMs);
    },
    waitOk: () => waitClusterOk(nodes, timeoutMs),
    stop,
  };
}

/**
 * Nodes start with a short cluster-node-timeout: they ping each other more often, so gossip
 * converges and `--cluster create` returns in about a second instead of two to five.
 */
const JOIN_NODE_TIMEOUT_MS = 1_000;
/** Once joined, a longer one: a node slowed down by a busy test machine is not declared failed. */
const NODE_TIMEOUT_MS = 5_000;

/** A redis-server in cluster mode. Its bus port is picked too: port + 10000 may exceed 65535. */
async function startClusterNode(): Promise<RedisServer> {
  const busPort = await freePort();
  return startRedisServer({
    extraConfig: ['cluster-enabled yes', 'cluster-config-file nodes.conf', `cluster-port ${busPort}`, `cluster-node-timeout ${JOIN_NODE_TIMEOUT_MS}`],
  });
}

async function settle(port: number): Promise<void> {
  await withNode(port, (r) => r.config('SET', 'cluster-node-timeout', String(NODE_TIMEOUT_MS)));
}

async function createCluster(cli: string, nodes: readonly RedisServer[], timeoutMs: number): Promise<void> {
  const args = ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'];
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
async function withNode<T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

/** Every node knows every other node, sees all 16384 slots served and says `cluster_state:ok`. */
async function waitClusterOk(nodes: readonly RedisServer[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const infos = await Promise.all(
      nodes.map((n) => withNode(n.port, (r) => r.cluster('INFO') as Promise<string>).catch((err: Error) => `error: ${err.message}`)),
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
async function slotOwners(nodes: readonly RedisServer[]): Promise<Uint16Array> {
  const first = nodes[0];
  if (!first) throw new Error('a cluster needs at least one node');
  const ranges = await withNode(first.port, (r) => r.cluster('SLOTS'));
  const owners = new Uint16Array(16_384);
  for (const [from, to, master] of ranges) {
    const port = master?.[1];
    const index = nodes.findIndex((n) => n.port === port);
    if (index < 0) throw new Error(`CLUSTER SLOTS names port ${port}, not one of ours`);
    owners.fill(index, from, to + 1);
  }
  return owners;
}
