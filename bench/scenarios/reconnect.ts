import { setTimeout as delay } from 'node:timers/promises';
import { mintTokens } from '../clients/redpoint-ws.js';
import { type ExpectedState, SyncClient } from '../clients/sync-client.js';
import { LatencyHistogram } from '../lib/histogram.js';
import { eachLimited, type HttpTarget } from '../lib/http.js';
import { CpuWindow, RssPeak, rssBytes } from '../lib/proc.js';
import { labelledSum } from '../lib/prom.js';
import { redisStats, statsConnection } from '../lib/redis-info.js';
import { atMost, emptyReport, fmt, type Section, type SectionReport } from '../lib/section.js';
import { BENCH_API_KEY, BENCH_JWT_SECRET, type RunningSystem, SYSTEMS, startSystem } from '../systems.js';
import { type DirectMesh, directMesh } from './engine-setup.js';
import { createMeshOverHttp, postInBatches } from './setup.js';

const TARGET_SECONDS = 2;
const CONVERGE_TIMEOUT_MS = 30_000;
const CONVERSATIONS_PER_USER = 4;
/** Messages per conversation before the clients first sync, and while they are away (every tenth conversation: many more). */
const SEED_MESSAGES = 3;
const AWAY_MESSAGES = 2;
const AWAY_MESSAGES_BUSY = 40;

interface ReconnectResult {
  engine: string;
  clients: number;
  converged: number;
  allSeconds: number;
  perClient: ReturnType<LatencyHistogram['summary']>;
  /** From the storm's start to each socket's open, and to its first sync page. */
  opened: ReturnType<LatencyHistogram['summary']>;
  synced: ReturnType<LatencyHistogram['summary']>;
  serverCpuSeconds: number;
  redisCpuSeconds: number;
  rssBefore: number;
  rssPeak: number;
  deltaPulls: number;
  snapshotPulls: number;
  clientPulls: number;
  clientSnapshots: number;
  clientErrors: number;
  /** How far behind the server the clients' cursors were: mean and max versions. */
  behindMean: number;
  behindMax: number;
}

/**
 * A reconnect storm: every client synced, all disconnect, messages land while they are away
 * (each client's cursor goes stale by tens of versions, some by more than the stream keeps), then
 * all reconnect at the same moment with their cursors. Timed until every client's state equals
 * the server's (GET /v1/users/:uid/unread, read before the storm).
 */
export const reconnectSection: Section = {
  id: 'reconnect',
  title: 'Reconnect storm — stale cursors, time to converge',
  inDefaultPlan: true,
  async run(ctx) {
    const users = ctx.options.quick ? 1000 : 2000;
    const report = emptyReport(this.id, this.title);
    const results: ReconnectResult[] = [];
    for (const id of ['redpoint-memory', 'redpoint-redis'] as const) {
      const system = await startSystem(SYSTEMS[id]);
      try {
        results.push(await storm(system, directMesh('r', users, CONVERSATIONS_PER_USER), ctx.log));
      } finally {
        await system.stop();
      }
    }
    fill(report, users, results);
    return report;
  },
};

async function storm(system: RunningSystem, mesh: DirectMesh, log: (line: string) => void): Promise<ReconnectResult> {
  const { http } = system;
  await createMeshOverHttp(http, mesh.convs);
  const seqs = new Map<string, number>();
  // One message per conversation per round, rounds one after the other: group commit never merges
  // two messages of one conversation, so every message is a version of both members.
  const send = async (count: (i: number) => number): Promise<void> => {
    const rounds = Math.max(...mesh.convs.map((_, i) => count(i)));
    for (let r = 0; r < rounds; r++) {
      const messages = mesh.convs.flatMap(({ conv, a, b }, i) => {
        if (r >= count(i)) return [];
        const seq = (seqs.get(conv) ?? 0) + 1;
        seqs.set(conv, seq);
        return [{ conv, seq, sender: seq % 2 === 1 ? a : b }];
      });
      await postInBatches(http, messages);
    }
  };
  await send(() => SEED_MESSAGES);
  const tokens = await mintTokens(BENCH_JWT_SECRET, BENCH_API_KEY, mesh.users);
  const clients = mesh.users.map((uid) => new SyncClient(uid, tokens.get(uid) as string));
  await eachLimited(clients, 50, (c) => c.connect(system.port));
  for (const c of clients) c.close();
  await send((i) => (i % 10 === 0 ? AWAY_MESSAGES_BUSY : AWAY_MESSAGES));
  const expected = await expectedStates(http, mesh.users);
  log(`  reconnect ${system.spec.id}: ${clients.length} clients away, cursors stale; storming`);

  const redis = system.redisUrl ? statsConnection(system.redisUrl) : undefined;
  try {
    const behind = clients.map((c) => (expected.get(c.uid)?.version ?? 0) - c.version);
    const snapshotsBefore = clients.reduce((n, c) => n + c.snapshots, 0);
    const metricsBefore = await http.expectOk('GET', '/metrics');
    const redisBefore = redis ? (await redisStats(redis)).cpuSeconds : 0;
    const rssBefore = rssBytes([system.pid]);
    const rss = new RssPeak(system.pid);
    const cpu = new CpuWindow(system.pid).start();
    const perClient = new LatencyHistogram();
    let converged = 0;
    let last = 0;
    const t0 = performance.now();
    for (const c of clients) {
      const want = expected.get(c.uid) as ExpectedState;
      let done = false;
      c.onApplied = () => {
        if (done || !c.matches(want)) return;
        done = true;
        converged += 1;
        last = performance.now() - t0;
        perClient.recordMs(last);
      };
    }
    const connecting = clients.map((c) => c.connect(system.port).catch(() => undefined));
    const deadline = t0 + CONVERGE_TIMEOUT_MS;
    while (converged < clients.length && performance.now() < deadline) await delay(5);
    const used = cpu.stop();
    const rssPeak = rss.stop();
    await Promise.all(connecting);
    const opened = new LatencyHistogram();
    const synced = new LatencyHistogram();
    for (const c of clients) {
      if (Number.isFinite(c.openedAt)) opened.recordMs(c.openedAt - t0);
      if (Number.isFinite(c.syncedAt)) synced.recordMs(c.syncedAt - t0);
    }
    const metricsAfter = await http.expectOk('GET', '/metrics');
    const pulls = (kind: string): number =>
      labelledSum(metricsAfter, 'redpoint_pulls_total', { kind, transport: 'ws' }) -
      labelledSum(metricsBefore, 'redpoint_pulls_total', { kind, transport: 'ws' });
    return {
      engine: system.spec.id,
      clients: clients.length,
      converged,
      allSeconds: converged === clients.length ? last / 1000 : NaN,
      perClient: perClient.summary(),
      opened: opened.summary(),
      synced: synced.summary(),
      serverCpuSeconds: used.cpuMicros / 1e6,
      redisCpuSeconds: redis ? (await redisStats(redis)).cpuSeconds - redisBefore : NaN,
      rssBefore,
      rssPeak,
      deltaPulls: pulls('delta'),
      snapshotPulls: pulls('snapshot'),
      clientPulls: clients.reduce((n, c) => n + c.pulls, 0),
      clientSnapshots: clients.reduce((n, c) => n + c.snapshots, 0) - snapshotsBefore,
      behindMean: behind.reduce((a, b) => a + b, 0) / Math.max(1, behind.length),
      behindMax: Math.max(...behind),
      clientErrors: clients.reduce((n, c) => n + c.errors, 0),
    };
  } finally {
    for (const c of clients) c.close();
    redis?.disconnect();
  }
}

async function expectedStates(http: HttpTarget, uids: readonly string[]): Promise<Map<string, ExpectedState>> {
  const out = new Map<string, ExpectedState>();
  await eachLimited(uids, 16, async (uid) => {
    const s = JSON.parse(await http.expectOk('GET', `/v1/users/${uid}/unread`)) as {
      epoch: string;
      version: number;
      conversations: Array<{ conv: string; lastSeq: number; readSeq: number }>;
    };
    out.set(uid, { epoch: s.epoch, version: s.version, convs: new Map(s.conversations.map((c) => [c.conv, { lastSeq: c.lastSeq, readSeq: c.readSeq }])) });
  });
  return out;
}

function fill(report: SectionReport, users: number, results: ReconnectResult[]): void {
  report.method.push(
    `${users.toLocaleString('en-US')} users, ${CONVERSATIONS_PER_USER} one-to-one conversations each (with other users of the set), ${SEED_MESSAGES} messages per conversation; every user connects (a client that keeps state by the protocol's rules: bench/clients/sync-client.ts), syncs, and disconnects. Then ${AWAY_MESSAGES} more messages land in each conversation (${AWAY_MESSAGES_BUSY} in every tenth), so each cursor is tens of versions stale and some are past what the stream keeps (those get a snapshot). The server's state of every user is read (GET /v1/users/:uid/unread), then all clients reconnect at the same instant with their cursors.`,
    "A client has converged when its epoch, version and every conversation's lastSeq/readSeq equal the server's. Server CPU (/proc, all threads) and Redis CPU (INFO) are over the storm, until the last client converged; RSS is sampled every 50 ms. Pulls by kind are the server's `redpoint_pulls_total{transport=\"ws\"}` (the hello's sync counts as one).",
  );
  report.tables.push({
    caption: 'Reconnect storm',
    table: {
      header: [
        'engine',
        'clients',
        'versions behind mean / max',
        'converged',
        'all converged in',
        'per client p50',
        'p99',
        'socket open p50 / p99',
        'first sync p50 / p99',
        'server CPU',
        'Redis CPU',
        'RSS before → peak',
        'delta / snapshot syncs',
        'extra pulls',
        'errors',
      ],
      rows: results.map((r) => [
        r.engine,
        fmt.int(r.clients),
        `${r.behindMean.toFixed(0)} / ${r.behindMax}`,
        fmt.int(r.converged),
        fmt.seconds(r.allSeconds),
        `${r.perClient.p50.toFixed(0)} ms`,
        `${r.perClient.p99.toFixed(0)} ms`,
        `${r.opened.p50.toFixed(0)} / ${r.opened.p99.toFixed(0)} ms`,
        `${r.synced.p50.toFixed(0)} / ${r.synced.p99.toFixed(0)} ms`,
        fmt.seconds(r.serverCpuSeconds),
        fmt.seconds(r.redisCpuSeconds),
        `${fmt.bytes(r.rssBefore)} → ${fmt.bytes(r.rssPeak)}`,
        `${fmt.int(r.deltaPulls)} / ${fmt.int(r.snapshotPulls)}`,
        fmt.int(r.clientPulls),
        String(r.clientErrors),
      ]),
    },
  });
  for (const r of results) {
    report.verdicts.push(atMost(`${r.engine}: all ${r.clients.toLocaleString('en-US')} clients converged`, r.allSeconds, TARGET_SECONDS, fmt.seconds));
    if (r.converged < r.clients)
      report.notes.push(`${r.engine}: only ${r.converged} of ${r.clients} clients converged within ${CONVERGE_TIMEOUT_MS / 1000} s.`);
  }
  report.notes.push(
    "The clients live in the load generator's one Node process, which also opens all the sockets at once: its own work is part of the time to converge.",
  );
  report.data = results;
}
