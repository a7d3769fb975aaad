import { FailureReasons } from '../lib/failures.js';
import { LatencyTracker } from '../lib/latency-tracker.js';
import { pace } from '../lib/pacer.js';
import { median, spikeNote, spikesFromStalls, Windows } from '../lib/per-second.js';
import { rssBytes } from '../lib/proc.js';
import { redisStats, statsConnection } from '../lib/redis-info.js';
import { atMost, emptyReport, fmt, type Section, type SectionReport, type Verdict } from '../lib/section.js';
import { LINE_COLORS, renderLineChart } from '../lib/svg-lines.js';
import { fmtMs } from '../lib/table.js';
import { type RunningSystem, SYSTEMS, startSystem } from '../systems.js';
import { type DirectMesh, directMesh } from './engine-setup.js';
import { connectAll, createMeshOverHttp, postInBatches } from './setup.js';

const ONLINE = 1000;
const TARGET_FLATNESS = 2;
/**
 * Warm-up at full scale, at the same rate, shown but not judged. Building 100k users over HTTP
 * in ~12 s leaves the server ~170 MB of garbage: its first full GC (~40 s into the load) shrinks
 * the heap 249 → 81 MB, V8 then sets a low old-space limit and runs four full GCs in 45 s
 * (18–37 ms pauses, incremental steps up to 21 ms) until the limit grows back, and the load
 * generator digests its own setup in the same minute (stalls of 18–36 ms). That transient is the
 * bulk load's, over ~90 s after the load starts (`--trace-gc`, BENCH_SERVER_NODE_ARGS); the
 * steady state after it is what "no periodic spikes" is about.
 */
const WARMUP_SECONDS_FULL = 120;

interface WindowFigures {
  /** A warm-up window: reported, not in the flatness. */
  warmup: boolean;
  ingestP50: number;
  ingestP99: number;
  notifyP50: number;
  notifyP99: number;
  messages: number;
  /** The load generator's worst event-loop stall in the window (its own noise, in every latency). */
  stallMs: number;
  rss: number;
  redisUsedMemory: number;
}

interface SoakResult {
  engine: string;
  windows: WindowFigures[];
  ingestFlatness: number;
  notifyFlatness: number;
  failed: number;
  /** Why they failed, most frequent first. */
  failures: Array<{ reason: string; count: number }>;
  /** POSTs sent again after their reused connection was reset before the reply (see HttpTarget.send). */
  resent: number;
  maxLagMs: number;
}

/**
 * Many users' state resident, steady ingest and notify for minutes: p99 per window must stay flat
 * (no periodic spikes from GC, expiry, snapshots or sweeps). Open-loop load; half the messages go
 * to conversations of the connected clients (timed to their pushes), half to the rest.
 */
export const soakSection: Section = {
  id: 'soak',
  title: 'Soak — p99 per window under steady load, many users resident',
  inDefaultPlan: true,
  async run(ctx) {
    const quick = ctx.options.quick;
    const users = quick ? 10_000 : 100_000;
    const rate = quick ? 400 : 1000;
    const seconds = ctx.options.soakSeconds;
    const windowSeconds = seconds >= 120 ? 10 : 5;
    const warmupWindows = quick ? 1 : Math.ceil(WARMUP_SECONDS_FULL / windowSeconds);
    const report = emptyReport(this.id, this.title);
    const results: SoakResult[] = [];
    // `--only soak,redpoint-memory` soaks one engine.
    const engines = (['redpoint-memory', 'redpoint-redis'] as const).filter(
      (id, _, all) => !ctx.options.only.some((t) => all.includes(t as never)) || ctx.options.only.includes(id),
    );
    for (const id of engines) {
      const system = await startSystem(SYSTEMS[id]);
      try {
        results.push(await soak(system, directMesh('k', users, 2), { rate, seconds, windowSeconds, warmupWindows }, ctx.log));
      } finally {
        await system.stop();
      }
    }
    fill(report, results, { users, rate, seconds, windowSeconds, warmupWindows });
    return report;
  },
};

async function soak(
  system: RunningSystem,
  mesh: DirectMesh,
  load: { rate: number; seconds: number; windowSeconds: number; warmupWindows: number },
  log: (line: string) => void,
): Promise<SoakResult> {
  const setup = performance.now();
  await createMeshOverHttp(system.http, mesh.convs);
  const seqs = new Map<string, number>();
  const next = (conv: { conv: string; a: string; b: string }): { conv: string; seq: number; sender: string } => {
    const seq = (seqs.get(conv.conv) ?? 0) + 1;
    seqs.set(conv.conv, seq);
    return { conv: conv.conv, seq, sender: seq % 2 === 1 ? conv.a : conv.b };
  };
  await postInBatches(system.http, mesh.convs.map(next));
  log(`  soak ${system.spec.id}: ${mesh.users.length} users resident (${((performance.now() - setup) / 1000).toFixed(0)} s); ${load.seconds} s of load`);

  const tracker = new LatencyTracker();
  const clients = await connectAll(system, mesh.users.slice(0, ONLINE), () => tracker.receiver());
  const redis = system.redisUrl ? statsConnection(system.redisUrl) : undefined;
  try {
    // Warm-up windows first, at the same rate (JIT, connection pools, the first flushes, and at
    // full scale the setup's GC transient: WARMUP_SECONDS_FULL), recorded like the others.
    const windows = new Windows(performance.now(), load.windowSeconds * 1000);
    tracker.onDelivery = (ms, sentAt) => windows.record('notify', ms, sentAt);
    const n = load.warmupWindows + Math.floor(load.seconds / load.windowSeconds);
    const memory: Array<{ rss: number; redis: number }> = [];
    const sample = async (): Promise<void> => {
      const rss = rssBytes([system.pid]);
      memory.push({ rss, redis: redis ? (await redisStats(redis)).usedMemory : NaN });
    };
    // At the end of each window.
    const samplers = Array.from({ length: n }, (_, k) => setTimeout(() => void sample(), windows.start + (k + 1) * windows.windowMs - performance.now()));
    const stopStalls = windows.watchStalls();
    // Online conversations: both members among the first ONLINE users.
    const online = mesh.convs.slice(0, ONLINE - 1);
    const offline = mesh.convs.slice(ONLINE);
    const failures = new FailureReasons();
    const resentBefore = system.http.resent;
    const result = await pace({
      failures,
      rate: load.rate,
      total: load.rate * n * load.windowSeconds,
      maxInFlight: 1000,
      deadlineMs: n * load.windowSeconds * 2000,
      start: async (i) => {
        const conv =
          i % 2 === 0
            ? (online[(i / 2) % online.length] as (typeof online)[number])
            : (offline[Math.floor(Math.random() * offline.length)] as (typeof offline)[number]);
        const m = next(conv);
        const sent = performance.now();
        if (i % 2 === 0) tracker.markSent(m.conv, m.seq, sent, sent >= windows.start);
        const reply = await system.http.send('POST', '/v1/messages', m);
        windows.record('ingest', performance.now() - sent, sent);
        windows.count('messages', sent);
        if (reply.status !== 200) failures.reply(reply);
        return reply.status === 200;
      },
    });
    const resent = system.http.resent - resentBefore;
    if (result.failed > 0 || resent > 0)
      log(`  soak ${system.spec.id}: ${result.failed} POSTs failed${result.failed > 0 ? `: ${failures.summary()}` : ''}; ${resent} resent`);
    for (const t of samplers) clearTimeout(t);
    stopStalls();
    if (memory.length < n) await sample();
    const ingest = windows.latencies('ingest', n);
    const notify = windows.latencies('notify', n);
    const counts = windows.counted('messages', n);
    const stallsByWindow = windows.latencies('stall', n);
    const figures: WindowFigures[] = ingest.map((l, i) => ({
      warmup: i < load.warmupWindows,
      ingestP50: l.p50,
      ingestP99: l.p99,
      notifyP50: notify[i]?.p50 ?? NaN,
      notifyP99: notify[i]?.p99 ?? NaN,
      messages: counts[i] ?? 0,
      stallMs: stallsByWindow[i]?.max ?? NaN,
      rss: memory[i]?.rss ?? NaN,
      redisUsedMemory: memory[i]?.redis ?? NaN,
    }));
    const flatness = (xs: number[]): number => Math.max(...xs.filter(Number.isFinite)) / median(xs);
    return {
      engine: system.spec.id,
      windows: figures,
      ingestFlatness: flatness(figures.filter((f) => !f.warmup).map((f) => f.ingestP99)),
      notifyFlatness: flatness(figures.filter((f) => !f.warmup).map((f) => f.notifyP99)),
      failed: result.failed,
      failures: failures.entries(),
      resent,
      maxLagMs: result.maxLagMs,
    };
  } finally {
    for (const c of clients) c.close();
    redis?.disconnect();
  }
}

function fill(
  report: SectionReport,
  results: SoakResult[],
  run: { users: number; rate: number; seconds: number; windowSeconds: number; warmupWindows: number },
): void {
  report.method.push(
    `${run.users.toLocaleString('en-US')} users resident (1:1 conversations with each other, two each, a message in every one), ${ONLINE} of them connected. ${run.rate} messages/s for ${run.seconds} s per engine, open loop, one per POST: every other message to a conversation between two connected users (notify latency: POST sent → each member's push), the others to a random conversation of the offline users (their state is written, nobody is pushed). p50/p99 per ${run.windowSeconds} s window. The first ${run.warmupWindows * run.windowSeconds} s are warm-up at the same rate, shown in the table (marked) but not judged: at full scale they hold the GC transient of having just built every user (see WARMUP_SECONDS_FULL in bench/scenarios/soak.ts). \`flatness\` = the worst measured window's p99 ÷ the median measured window's p99. \`generator stall\`: the load generator's own worst event-loop stall in the window (a 10 ms timer's lateness): a p99 spike with a stall as large is the load generator's, not the server's.`,
  );
  const verdicts: Verdict[] = [];
  for (const r of results) {
    report.tables.push({
      caption: `${r.engine}: per ${run.windowSeconds} s window`,
      table: {
        header: [
          'window ends at',
          'messages',
          'ingest p50 ms',
          'ingest p99 ms',
          'notify p50 ms',
          'notify p99 ms',
          'generator stall max ms',
          'server RSS',
          'Redis used_memory',
        ],
        rows: r.windows.map((w, i) => [
          `${(i + 1) * run.windowSeconds} s${w.warmup ? ' (warm-up)' : ''}`,
          fmt.int(w.messages),
          fmtMs(w.ingestP50),
          fmtMs(w.ingestP99),
          fmtMs(w.notifyP50),
          fmtMs(w.notifyP99),
          fmtMs(w.stallMs),
          fmt.bytes(w.rss),
          fmt.bytes(w.redisUsedMemory),
        ]),
      },
    });
    verdicts.push(atMost(`${r.engine}: ingest p99 flatness`, r.ingestFlatness, TARGET_FLATNESS, fmt.ratio));
    verdicts.push(atMost(`${r.engine}: notify p99 flatness`, r.notifyFlatness, TARGET_FLATNESS, fmt.ratio));
    const measured = r.windows.filter((w) => !w.warmup);
    const stalls = measured.map((w) => w.stallMs);
    for (const [what, p99s] of [
      ['ingest', measured.map((w) => w.ingestP99)],
      ['notify', measured.map((w) => w.notifyP99)],
    ] as const) {
      const note = spikeNote(`${r.engine}, ${what}`, spikesFromStalls(p99s, stalls));
      if (note) report.notes.push(note);
    }
    const warm = r.windows.filter((w) => w.warmup);
    if (warm.length > 1) {
      const worst = Math.max(...warm.map((w) => Math.max(w.ingestP99, w.notifyP99)).filter(Number.isFinite));
      report.notes.push(
        `${r.engine}: during the ${warm.length * run.windowSeconds} s warm-up the worst window's p99 was ${fmtMs(worst)} ms (the measured windows' median: ingest ${fmtMs(median(measured.map((w) => w.ingestP99)))} ms).`,
      );
    }
    if (r.failed > 0 || r.maxLagMs > 100) {
      const why = r.failures.map((f) => `${f.count} × ${f.reason}`).join(', ');
      report.notes.push(
        `${r.engine}: ${r.failed} POSTs failed${why ? ` (${why})` : ''}; the load generator fell up to ${r.maxLagMs.toFixed(0)} ms behind its schedule.`,
      );
    }
    if (r.resent > 0)
      report.notes.push(
        `${r.engine}: ${r.resent} POSTs were sent a second time (and count once): their pooled connection was reset before any reply, HTTP/1.1 keep-alive's race with the server's idle close.`,
      );
    report.charts.push({
      name: r.engine,
      title: `${r.engine}: p99 per window`,
      svg: renderLineChart({
        title: `Soak, ${r.engine}: p99 per ${run.windowSeconds} s window`,
        subtitle: `${run.users.toLocaleString('en-US')} users resident, ${run.rate} messages/s`,
        xLabel: 'seconds',
        yLabel: 'ms',
        series: [
          { name: 'ingest p99', color: LINE_COLORS[0], points: r.windows.map((w, i) => [(i + 1) * run.windowSeconds, w.ingestP99]) },
          { name: 'notify p99', color: LINE_COLORS[1], points: r.windows.map((w, i) => [(i + 1) * run.windowSeconds, w.notifyP99]) },
        ],
      }),
    });
  }
  report.verdicts.push(...verdicts);
  report.notes.push('The `≤ 2×` flatness target is this bench\'s reading of "flat (no periodic spikes)"; the issue gives no number.');
  report.data = results;
}
