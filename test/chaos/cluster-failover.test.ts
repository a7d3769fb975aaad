import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UnreadSummary } from '../../protocol/types.js';
import { Authenticator } from '../../server/auth/tokens.js';
import { userKeys } from '../../server/engine/redis/keys.js';
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.js';
import type { RedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';
import { WsClient } from '../helpers/ws-client.js';
import { waitMatchesServer } from '../helpers/ws-expect.js';
import { conversations, createConversations, IngestLoad, missingAcked, printFigures } from './ingest-load.js';

/**
 * Chaos: a Redis Cluster of 3 masters with a replica each (`cluster-node-timeout 1000`), two
 * Redpoint processes on it with REDIS_WAIT_REPLICAS=1 (the load posts to one, WebSocket clients
 * sit on the other). A master is killed (SIGKILL) under ingest and its replica promoted, the
 * killed node restarted at once as the new master's replica (WAIT 1 needs one): Redpoint follows
 * (MOVED, slot map refresh), ingest is back within 6 s of the kill, nothing acknowledged is lost,
 * the users of that master get a new epoch and every client converges. Then a manual CLUSTER FAILOVER
 * of another master under ingest: no loss either.
 */
/** A loaded 2-core CI machine can take over 20 s to start a server (tsx compiles the sources). */
const LOADED = { listenTimeoutMs: 90_000 };
const STORE_TIMEOUT_MS = 2_000;
const WAIT_TIMEOUT_MS = 500;
const RECOVERY_BOUND_MS = 6_000;

describe('chaos: Redis Cluster with replicas, failover under ingest, two Redpoint processes', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
  });

  let cluster: RedisCluster;
  let ingest: ServerProcess;
  let sockets: ServerProcess;
  const clients: WsClient[] = [];
  // A 503 is the documented "nothing was applied: retry" (PROTOCOL.md, Errors): during and just
  // after a failover a read may meet a master that is still changing hands, so the check retries
  // it for a while, as a client would; any other status, or a 503 that lasts, fails the test.
  const unread = async (uid: string): Promise<UnreadSummary> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const res = await fetch(`${sockets.url}/v1/users/${uid}/unread`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
      if (res.status === 200) return (await res.json()) as UnreadSummary;
      const body = await res.text();
      if (res.status !== 503 || Date.now() > deadline) throw new Error(`GET unread ${uid}: ${res.status} ${body}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  async function setup(): Promise<void> {
    cluster = await startRedisCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1_000 });
    cleanup.push(() => cluster.stop());
    const env = {
      REDIS_CLUSTER_NODES: cluster.seeds,
      REDIS_WAIT_REPLICAS: '1',
      REDIS_WAIT_TIMEOUT_MS: String(WAIT_TIMEOUT_MS),
      STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS),
      WS_VERSION_EVERY_SECONDS: '1',
    };
    [ingest, sockets] = await Promise.all([spawnServer(env, LOADED), spawnServer(env, LOADED)]);
    cleanup.push(async () => {
      await Promise.all([ingest.stop(), sockets.stop()]);
    });
    cleanup.push(async () => {
      await Promise.all(clients.map((c) => c.close()));
    });
  }

  /**
   * Ingest under load while `fault` runs; the figures, after checking nothing acknowledged was
   * lost and clients converged. `fault` names the master it fails over (before it does): the
   * clients whose user lives there must get a new epoch (a snapshot), every other client must keep
   * its own (a run is per master: runs.ts).
   */
  async function underLoad(
    tag: string,
    fault: (load: IngestLoad, replaced: (master: RedisServer) => Promise<void>) => Promise<{ at: number; extra: Record<string, unknown> }>,
  ): Promise<Record<string, unknown>> {
    const convs = conversations(24, tag);
    await createConversations(ingest.url, convs);
    const auth = new Authenticator(TEST_JWT_SECRET, TEST_API_KEY);
    const mine: WsClient[] = [];
    const uids = convs.slice(0, 6).map((c) => c.members[1]);
    for (const uid of uids) {
      const client = await WsClient.open(`ws://127.0.0.1:${sockets.port}/v1/ws`, { token: await auth.mintUserToken(uid) });
      await client.ready();
      clients.push(client);
      mine.push(client);
    }
    const epochsBefore = mine.map((c) => c.cursor?.epoch);
    const load = new IngestLoad(() => ingest.url, convs, 8);
    load.start();
    await load.ackedAtLeast(200);
    let onReplaced: string[] | undefined;
    const { at, extra } = await fault(load, async (master) => {
      onReplaced = [];
      for (const uid of uids) if ((await cluster.masterOf(userKeys('rp', uid).meta)) === master) onReplaced.push(uid);
    });
    if (!onReplaced) throw new Error(`${tag}: the fault did not name the master it replaces`);
    await load.ackedAtLeast(load.ackedSoFar + 200, 30_000);
    await load.stop();
    const missing = await missingAcked(ingest.url, load, convs);
    const convergeStarted = Date.now();
    for (const client of mine) await waitMatchesServer(client, { unread }, 60_000, `after ${tag}`);
    const f = load.figures();
    const figures = {
      ...f,
      missing: missing.length,
      firstAckAfterFaultMs: load.recovered === undefined ? 0 : load.recovered - at,
      clientsConvergedMs: Date.now() - convergeStarted,
      clientsWithNewEpoch: `${mine.filter((c, i) => c.cursor?.epoch !== epochsBefore[i]).length}/${mine.length}`,
      usersOnReplacedMaster: onReplaced.join(' '),
      ...extra,
    };
    expect(missing).toEqual([]);
    // By name: a new epoch exactly for the users of the replaced master.
    const renewed = uids.filter((_, i) => mine[i]?.cursor?.epoch !== epochsBefore[i]);
    expect(renewed.sort(), `${tag}: clients with a new epoch`).toEqual([...onReplaced].sort());
    const failures = Object.keys(f.byStatus).filter((s) => s !== '200');
    expect(
      failures.every((s) => s === '503 unavailable' || s === '503 outcome_unknown'),
      `failures: ${failures.join(', ')}`,
    ).toBe(true);
    expect(f.slowestFailureMs).toBeLessThan(STORE_TIMEOUT_MS + WAIT_TIMEOUT_MS + 1_500);
    return figures;
  }

  // Six redis-servers and two Redpoint processes: on a loaded machine starting them takes a while.
  beforeAll(() => setup(), 120_000);

  it('kill -9 of a master: its replica is promoted, Redpoint follows within 6 s, nothing acknowledged is lost, its users re-snapshot', async () => {
    const tag = 'ck';
    // The master holding the first client's user: its clients must see a new epoch.
    const firstUser = `${tag}0b`;
    let old: RedisServer | undefined;
    const figures = await underLoad(tag, async (load, replaced) => {
      old = await cluster.masterOf(userKeys('rp', firstUser).meta);
      await replaced(old);
      const at = Date.now();
      await old.kill();
      const promoted = await cluster.waitFailover(userKeys('rp', firstUser).meta, old);
      const promotedAfterMs = Date.now() - at;
      // The promoted replica has no replica of its own: with WAIT 1 its slots take no write until
      // one is back. The killed node is restarted at once (what an orchestrator does) and comes
      // back as the new master's replica.
      await cluster.restartNode(cluster.nodes.indexOf(old));
      const oldBackAsReplicaMs = Date.now() - at;
      await load.failuresAtLeast(1, 10_000).catch(() => undefined);
      return { at, extra: { promotedAfterMs, oldBackAsReplicaMs, promotedPort: promoted.port } };
    });
    printFigures('Cluster master SIGKILL, replica promoted, REDIS_WAIT_REPLICAS=1', figures);
    expect(figures.firstAckAfterFaultMs).toBeLessThan(RECOVERY_BOUND_MS);
    expect(String(figures.usersOnReplacedMaster).split(' ')).toContain(firstUser);
  }, 120_000);

  it("manual CLUSTER FAILOVER of another master under ingest: no loss; only that master's users re-snapshot", async () => {
    const tag = 'cm';
    const figures = await underLoad(tag, async (_load, replaced) => {
      // A master that still has its replica: one that was not failed over before. Those of the
      // clients' users first, so that some client must re-snapshot.
      const masters = new Set<RedisServer>();
      for (let i = 0; i < 6; i++) masters.add(await cluster.masterOf(userKeys('rp', `${tag}${i}b`).meta));
      for (let i = 0; i < 64; i++) masters.add(await cluster.masterOf(`k${i}`));
      let target: { master: RedisServer; replica: RedisServer } | undefined;
      for (const master of masters) {
        const probe = cluster.probe(master);
        const info = await probe.info('replication');
        probe.disconnect();
        const port = /^slave0:ip=[^,]+,port=(\d+),state=online/m.exec(info)?.[1];
        const replica = cluster.nodes.find((n) => String(n.port) === port);
        if (replica) {
          target = { master, replica };
          break;
        }
      }
      if (!target) throw new Error('no master with an online replica');
      await replaced(target.master);
      const key = await keyServedBy(cluster, target.master);
      const at = Date.now();
      const probe = cluster.probe(target.replica);
      await probe.cluster('FAILOVER');
      probe.disconnect();
      // The replica serves the master's slots once the handover is done.
      await cluster.waitFailover(key, target.master);
      return { at, extra: { failoverMs: Date.now() - at } };
    });
    printFigures('Cluster manual CLUSTER FAILOVER, REDIS_WAIT_REPLICAS=1', figures);
  }, 120_000);
});

/** A key whose slot `node` serves now. */
async function keyServedBy(cluster: RedisCluster, node: RedisServer): Promise<string> {
  for (let i = 0; i < 1_000; i++) if ((await cluster.masterOf(`probe${i}`)) === node) return `probe${i}`;
  throw new Error(`no key served by ${node.port}`);
}
