import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import type { UnreadSummary } from '../../protocol/types.js';
import { Authenticator } from '../../server/auth/tokens.js';
import { type SentinelDeployment, startSentinel } from '../helpers/redis-sentinel.js';
import type { RedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';
import { WsClient } from '../helpers/ws-client.js';
import { waitMatchesServer } from '../helpers/ws-expect.js';
import { conversations, createConversations, IngestLoad, type LoadConversation, missingAcked, printFigures } from './ingest-load.js';

/**
 * Chaos: the Redis master behind Sentinel is killed (SIGKILL) under ingest, with two Redpoint
 * processes on it (the load posts to one, WebSocket clients sit on the other, so pushes cross
 * processes over the bus, which must follow the master too). A master, two replicas (WAIT 1 can
 * still be met once one is promoted) and three Sentinels with `down-after-milliseconds 1000`.
 *
 * Just before the kill the replicas are frozen (SIGSTOP) and cut off from the master (CLIENT KILL
 * TYPE replica), a burst of messages goes to conversations of their own and is answered in full,
 * the master is killed, and only then are the replicas let go (SIGCONT): what the master took
 * during the burst never reaches a replica, and no request of it is left to be resent to the
 * promoted master, whatever the machine's load. (The burst used to run while the replicas slept a
 * timed DEBUG SLEEP sent over a fresh connection, and went on through the kill: in one run of five
 * the replicas were awake in time to fetch it; with them frozen, in one run of ten the requests in
 * flight at the kill landed on the promoted master and raised every head past the lost seqs.
 * Either way nothing acknowledged counted as lost.)
 * With REDIS_WAIT_REPLICAS=1 none of it may be acknowledged (503 outcome_unknown instead); without
 * it, what was acknowledged and lost is counted and reported. Either way ingest is back within
 * 6 s of the kill, failures are bounded 503s, the clients see a new epoch and converge.
 */
/** A loaded 2-core CI machine can take over 20 s to start a server (tsx compiles the sources). */
const LOADED = { listenTimeoutMs: 90_000 };
const STORE_TIMEOUT_MS = 1_000;
const WAIT_TIMEOUT_MS = 500;
const RECOVERY_BOUND_MS = 6_000;

/** Messages the burst sends to each of its conversations while the replicas are frozen (with WAIT=0: all acknowledged, all lost). */
const BURST_ROUNDS = 3;

function pidOf(node: RedisServer): number {
  const pid = node.pid();
  if (pid === undefined) throw new Error(`redis-server on port ${node.port} is not running`);
  return pid;
}

interface BurstRounds {
  /** Highest seq acknowledged per conversation (1..it all acknowledged). */
  acked: Map<string, number>;
  byStatus: Record<string, number>;
}

/**
 * Posts seq 1..rounds to every conversation, a round at a time, all of a round at once, until a
 * round has a failure. Every request is answered when this resolves: none is in flight at the kill,
 * where the Redis client could resend it to the promoted master, whose head would then pass the
 * lost seqs below it (a head is a max-register: it cannot show a hole).
 */
async function postRounds(url: string, convs: readonly LoadConversation[], rounds: number): Promise<BurstRounds> {
  const acked = new Map<string, number>();
  const byStatus: Record<string, number> = {};
  for (let seq = 1; seq <= rounds; seq++) {
    const statuses = await Promise.all(
      convs.map(async (c) => {
        const res = await fetch(`${url}/v1/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ conv: c.conv, seq, sender: c.members[seq % 2] }),
        });
        const body = (await res.json()) as { error?: { code?: string } };
        const status = res.status === 200 ? '200' : `${res.status} ${body.error?.code ?? ''}`;
        byStatus[status] = (byStatus[status] ?? 0) + 1;
        if (status === '200') acked.set(c.conv, seq);
        return status;
      }),
    );
    if (statuses.some((s) => s !== '200')) break;
  }
  return { acked, byStatus };
}

async function scenario(waitReplicas: number, cleanup: Array<() => Promise<void>>): Promise<Record<string, unknown>> {
  const d: SentinelDeployment = await startSentinel({ replicas: 2, downAfterMs: 1_000 });
  cleanup.push(() => d.stop());
  const env = {
    REDIS_SENTINELS: d.sentinelList,
    REDIS_SENTINEL_MASTER: d.name,
    REDIS_WAIT_REPLICAS: String(waitReplicas),
    REDIS_WAIT_TIMEOUT_MS: String(WAIT_TIMEOUT_MS),
    STORE_TIMEOUT_MS: String(STORE_TIMEOUT_MS),
    WS_VERSION_EVERY_SECONDS: '1',
  };
  const servers: ServerProcess[] = await Promise.all([spawnServer(env, LOADED), spawnServer(env, LOADED)]);
  cleanup.push(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });
  const [ingest, sockets] = servers as [ServerProcess, ServerProcess];
  const tag = `w${waitReplicas}-`;
  const convs = conversations(24, tag);
  const burst = conversations(32, `${tag}burst-`);
  await createConversations(ingest.url, [...convs, ...burst]);
  const auth = new Authenticator(TEST_JWT_SECRET, TEST_API_KEY);
  const clients: WsClient[] = [];
  cleanup.push(async () => {
    await Promise.all(clients.map((c) => c.close()));
  });
  for (const c of [...convs.slice(0, 4), ...burst.slice(0, 2)]) {
    const client = await WsClient.open(`ws://127.0.0.1:${sockets.port}/v1/ws`, { token: await auth.mintUserToken(c.members[1]) });
    await client.ready();
    clients.push(client);
  }
  const epochsBefore = clients.map((c) => c.cursor?.epoch);
  const load = new IngestLoad(() => ingest.url, convs, 8);
  load.start();
  await load.ackedAtLeast(200);

  // The burst: replicas frozen, so nothing the master takes now reaches them before the kill.
  const old = await d.master();
  const frozen = d.nodes.filter((n) => n !== old).map(pidOf);
  let burstRounds: BurstRounds = { acked: new Map(), byStatus: {} };
  let killedAt = 0;
  for (const pid of frozen) process.kill(pid, 'SIGSTOP');
  try {
    // ...and cut off: what was in flight to them would still reach them when they resume (the
    // kernel keeps it for them), what the master takes from now on stays in its backlog, lost with it.
    const oldProbe = d.probe(old);
    await oldProbe.call('CLIENT', 'KILL', 'TYPE', 'replica');
    oldProbe.disconnect();
    burstRounds = await postRounds(ingest.url, burst, BURST_ROUNDS);
    killedAt = Date.now();
    await old.kill();
  } finally {
    for (const pid of frozen) process.kill(pid, 'SIGCONT');
  }
  const burstAcked = burstRounds.acked;
  const promoted = await d.waitNewMaster(old);
  const promotedAfterMs = Date.now() - killedAt;
  await load.failuresAtLeast(1, 10_000).catch(() => undefined);
  await load.ackedAtLeast(load.ackedSoFar + 200, 30_000);
  await load.stop();
  const firstAckAfterKillMs = (load.recovered ?? Number.NaN) - killedAt;

  const missing = await missingAcked(ingest.url, load, convs);
  // Sentinel may fail over a second time (the promoted master starved for down-after-milliseconds
  // on a loaded machine): with WAIT=0 that one may lose the main load's last acknowledged writes
  // too, as WAIT=0 allows. Seen once in ten runs at load 11-19: 20 of 24 conversations one message
  // short at the end, each its last. Only a failover of its own excuses the main load's losses.
  const finalMaster = await d.master();
  const failedOverAgain = finalMaster !== promoted;
  // What the burst acknowledged before the kill and the new master does not have.
  let burstLost = 0;
  for (const c of burst) {
    const acked = burstAcked.get(c.conv) ?? 0;
    if (acked === 0) continue;
    const res = await fetch(`${ingest.url}/v1/users/${c.members[0]}/unread`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    const body = (await res.json()) as { conversations: Array<{ conv: string; lastSeq: number }> };
    const lastSeq = body.conversations.find((s) => s.conv === c.conv)?.lastSeq ?? 0;
    burstLost += Math.max(0, acked - lastSeq);
  }
  const socketsRefused: string[] = [];
  const unread = async (uid: string): Promise<UnreadSummary> => {
    // The process the clients are on recovers on its own: until it does, it answers 503 (counted).
    for (const deadline = Date.now() + 10_000; ; ) {
      const res = await fetch(`${sockets.url}/v1/users/${uid}/unread`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
      const text = await res.text();
      if (res.status === 200) return JSON.parse(text) as UnreadSummary;
      socketsRefused.push(`${res.status} ${text.slice(0, 120)}`);
      if (Date.now() > deadline) {
        console.log(
          sockets
            .lines()
            .filter((l) => l.event !== undefined)
            .map((l) => JSON.stringify(l))
            .join('\n'),
        );
        throw new Error(`GET unread on the clients' process: ${socketsRefused.slice(-3).join(' | ')}`);
      }
      await delay(100);
    }
  };
  const convergeStarted = Date.now();
  for (const client of clients) await waitMatchesServer(client, { unread }, 60_000, 'after the failover');
  const epochChanged = clients.filter((c, i) => c.cursor?.epoch !== epochsBefore[i]).length;
  const f = load.figures();
  const figures = {
    waitReplicas,
    ...f,
    missing: missing.length,
    burstAcked: [...burstAcked.values()].reduce((a, b) => a + b, 0),
    burstAckedLost: burstLost,
    burstStatuses: burstRounds.byStatus,
    promotedAfterMs,
    firstAckAfterKillMs,
    clientsConvergedMs: Date.now() - convergeStarted,
    clientsWithNewEpoch: `${epochChanged}/${clients.length}`,
    socketsProcessRefused: socketsRefused.length,
    socketsProcessLastRefusal: socketsRefused.at(-1),
    promotedPort: promoted.port,
    finalMasterPort: finalMaster.port,
    missingList: missing.slice(0, 5),
  };
  printFigures(`Sentinel failover, REDIS_WAIT_REPLICAS=${waitReplicas}`, figures);
  if (waitReplicas > 0 || !failedOverAgain) expect(missing).toEqual([]);
  const failures = Object.keys(f.byStatus).filter((s) => s !== '200');
  expect(
    failures.every((s) => s === '503 unavailable' || s === '503 outcome_unknown'),
    `failures: ${failures.join(', ')}`,
  ).toBe(true);
  expect(f.slowestFailureMs).toBeLessThan(STORE_TIMEOUT_MS + WAIT_TIMEOUT_MS + 1_500);
  expect(firstAckAfterKillMs).toBeLessThan(RECOVERY_BOUND_MS);
  // A new master, new epochs: every client re-snapshotted instead of continuing its cursor.
  expect(epochChanged).toBe(clients.length);
  return figures;
}

describe('chaos: Sentinel failover (kill -9 of the master) under ingest, two Redpoint processes', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
  });

  /** Each scenario's processes and Redis stopped as soon as it ends: the next starts on a machine without them. */
  const run = async (waitReplicas: number): Promise<Record<string, unknown>> => {
    const own: Array<() => Promise<void>> = [];
    cleanup.push(async () => {
      for (const step of own.reverse()) await step().catch(() => undefined);
    });
    try {
      return await scenario(waitReplicas, own);
    } finally {
      for (const step of own.splice(0).reverse()) await step().catch(() => undefined);
    }
  };

  it('REDIS_WAIT_REPLICAS=1: nothing acknowledged is lost, not even what the master took while its replicas slept', async () => {
    const figures = await run(1);
    expect(figures.burstAckedLost).toBe(0);
  }, 120_000);

  it('REDIS_WAIT_REPLICAS=0: what the master acknowledged but never shipped is lost, counted; clients re-snapshot and converge', async () => {
    const figures = await run(0);
    // The loss the WAIT prevents is real: without it, the burst's acknowledged messages are gone.
    expect(figures.burstAcked).toBeGreaterThan(0);
    expect(figures.burstAckedLost).toBeGreaterThan(0);
  }, 120_000);
});
