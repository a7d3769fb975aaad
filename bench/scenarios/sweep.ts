import { setTimeout as delay } from 'node:timers/promises';
import type { JsonWsClient } from '../clients/json-ws.js';
import { mintTokens, redpointSocket } from '../clients/redpoint-ws.js';
import { eachLimited } from '../lib/http.js';
import { pace } from '../lib/pacer.js';
import { mean, median, spikeNote, spikesFromStalls, Windows } from '../lib/per-second.js';
import { currentFileLimit, raiseFileLimit } from '../lib/proc.js';
import { histogramBuckets, quantileBetween } from '../lib/prom.js';
import { atMost, emptyReport, fmt, type Section } from '../lib/section.js';
import { LINE_COLORS, renderLineChart } from '../lib/svg-lines.js';
import { fmtMs } from '../lib/table.js';
import { BENCH_API_KEY, BENCH_JWT_SECRET, SYSTEMS, startSystem } from '../systems.js';
import { directMesh } from './engine-setup.js';
import { createMeshOverHttp, postInBatches } from './setup.js';

/** Source addresses for the clients: ~28k ephemeral ports each, so 20k sockets never run out. */
const LOOPBACKS = ['127.0.0.1', '127.0.0.2', '127.0.0.3', '127.0.0.4'];
const CONNECT_CONCURRENCY = 100;
const INGEST_RATE = 200;
/** Seconds of ingest before the measured ones (see the warm-up in run). */
const WARMUP_SECONDS = 3;
const FILES_OF_ITS_OWN = 300;

const tooFew = (who: string, limit: number, users: number): string =>
  `sweep: ${who} may open ${limit} files, ${users} users need ${users + FILES_OF_ITS_OWN}: raise the hard limit (ulimit -Hn, or CAP_SYS_RESOURCE for prlimit) or pass --sweep-users ${Math.max(10, limit - FILES_OF_ITS_OWN)}`;
/** A flat sweep: the busiest second within this factor of the mean (a burst would be `period` ×). */
const TARGET_MAX_OVER_MEAN = 1.5;
const TARGET_P99_FLATNESS = 2;

/**
 * The safety-net version sweep with many users on one server process (Redis engine): every
 * connected user is checked once per WS_VERSION_EVERY_SECONDS, spread over the period. Checks
 * per second are counted at the clients (version frames); ingest latency per second comes from a
 * steady paced ingest, and the store latency per second from the server's
 * redpoint_store_op_seconds histogram.
 */
export const sweepSection: Section = {
  id: 'sweep',
  title: 'Version sweep with many connected users — checks/s and store latency',
  inDefaultPlan: true,
  async run(ctx) {
    const users = ctx.options.sweepUsers;
    const period = ctx.options.sweepPeriodSeconds;
    const report = emptyReport(this.id, this.title);
    // Both this process (the clients) and the server hold one socket per user, plus a few hundred
    // files of their own.
    const needed = users + FILES_OF_ITS_OWN;
    const fileLimit = await raiseFileLimit(process.pid, needed);
    if (fileLimit < needed) throw new Error(tooFew('this process', fileLimit, users));
    const system = await startSystem(SYSTEMS['redpoint-redis'], { env: { WS_VERSION_EVERY_SECONDS: String(period) }, maxFiles: needed });
    const clients: JsonWsClient[] = [];
    try {
      const serverLimit = await currentFileLimit(system.pid, 'soft');
      if (serverLimit < needed) throw new Error(tooFew('the server', serverLimit, users));
      const mesh = directMesh('w', users, 2);
      await createMeshOverHttp(system.http, mesh.convs);
      const seqs = new Map<string, number>();
      const message = (i: number): { conv: string; seq: number; sender: string } => {
        const c = mesh.convs[i % mesh.convs.length] as { conv: string; a: string; b: string };
        const seq = (seqs.get(c.conv) ?? 0) + 1;
        seqs.set(c.conv, seq);
        return { conv: c.conv, seq, sender: seq % 2 === 1 ? c.a : c.b };
      };
      await postInBatches(
        system.http,
        mesh.convs.map((_, i) => message(i)),
      );
      const tokens = await mintTokens(BENCH_JWT_SECRET, BENCH_API_KEY, mesh.users);
      let windows: Windows | undefined;
      const connectStart = performance.now();
      await eachLimited(mesh.users, CONNECT_CONCURRENCY, async (uid, i) => {
        const onFrame = (frame: { t: string }): void => {
          if (frame.t === 'version') windows?.count('checks');
        };
        clients.push(await redpointSocket(system.port, uid, tokens.get(uid) as string, onFrame, LOOPBACKS[i % LOOPBACKS.length]));
      });
      const connectSeconds = (performance.now() - connectStart) / 1000;
      ctx.log(`  sweep: ${users} clients connected in ${connectSeconds.toFixed(1)} s; measuring ${period + 5} s`);

      const seconds = period + 5;
      // Warm-up at the same rate, not recorded: right after the connect storm the server is still
      // answering the clients' first pulls, and the load generator opens its HTTP connections
      // (the first seconds' p99 was 2–3× the rest's, on the old code as on the new).
      await pace({
        rate: INGEST_RATE,
        total: INGEST_RATE * WARMUP_SECONDS,
        maxInFlight: 200,
        deadlineMs: WARMUP_SECONDS * 2000,
        start: async (i) => (await system.http.send('POST', '/v1/messages', message(i))).status === 200,
      });
      windows = new Windows(performance.now(), 1000);
      const w = windows;
      const stopStalls = w.watchStalls();
      const store: Array<{ apply: number; record: number; ops: number }> = [];
      let scraping = true;
      const scraper = (async () => {
        let before = await system.http.expectOk('GET', '/metrics');
        for (let s = 1; scraping; s++) {
          await delay(Math.max(0, w.start + w.windowMs * s - performance.now()));
          const after = await system.http.expectOk('GET', '/metrics');
          const q = (op: string): { value: number; count: number } =>
            quantileBetween(histogramBuckets(before, 'redpoint_store_op_seconds', { op }), histogramBuckets(after, 'redpoint_store_op_seconds', { op }), 0.99);
          const apply = q('apply_user_ops');
          store.push({ apply: apply.value * 1000, record: q('record_message').value * 1000, ops: apply.count });
          before = after;
        }
      })();
      const ingest = await pace({
        rate: INGEST_RATE,
        total: INGEST_RATE * seconds,
        maxInFlight: 200,
        deadlineMs: seconds * 2000,
        start: async (i) => {
          const sent = performance.now();
          const reply = await system.http.send('POST', '/v1/messages', message(INGEST_RATE * WARMUP_SECONDS + i));
          w.record('ingest', performance.now() - sent, sent);
          return reply.status === 200;
        },
      });
      scraping = false;
      await scraper;
      stopStalls();
      const stalls = w.latencies('stall', seconds);

      const checks = w.counted('checks', seconds);
      const latency = w.latencies('ingest', seconds);
      const meanChecks = mean(checks);
      const maxChecks = Math.max(...checks);
      const p99s = latency.map((l) => l.p99);
      report.method.push(
        `${users.toLocaleString('en-US')} users (\`--sweep-users\`; the default 19,500 keeps both the server's and the load generator's sockets under an open-file limit of 20,000 per process, which this machine cannot raise) connected to one Redpoint process (Redis engine, WS_VERSION_EVERY_SECONDS=${period}), each in two 1:1 conversations with a message in each; the clients (one Node process, spread over ${LOOPBACKS.length} loopback addresses) connected in ${connectSeconds.toFixed(1)} s. Then ${WARMUP_SECONDS} s of the same ingest as warm-up, not recorded, and ${seconds} s measured: version frames per second counted at the clients (each is one version check of one user's socket), a steady ${INGEST_RATE} messages/s ingest (one per POST, open loop) timed per second, and the server's \`redpoint_store_op_seconds\` read every second (p99 as the upper bound of its bucket).`,
        `Were the checks made in one burst per period, one second would carry all ${users.toLocaleString('en-US')} of them: max/mean = ${period}×.`,
      );
      report.tables.push({
        caption: 'Per second',
        table: {
          header: [
            'second',
            'version checks',
            'ingest p50 ms',
            'ingest p99 ms',
            'store p99 ms (apply_user_ops, bucket)',
            'store p99 ms (record_message, bucket)',
            'generator stall max ms',
          ],
          rows: checks.map((c, i) => [
            String(i + 1),
            fmt.int(c),
            fmtMs(latency[i]?.p50 ?? NaN),
            fmtMs(latency[i]?.p99 ?? NaN),
            bucketMs(store[i]?.apply ?? NaN),
            bucketMs(store[i]?.record ?? NaN),
            fmtMs(stalls[i]?.max ?? NaN),
          ]),
        },
      });
      const chart = (name: string, title: string, yLabel: string, series: Array<{ name: string; values: number[] }>): void => {
        report.charts.push({
          name,
          title,
          svg: renderLineChart({
            title,
            subtitle: `${users.toLocaleString('en-US')} users connected, WS_VERSION_EVERY_SECONDS=${period}, ${INGEST_RATE} messages/s ingest`,
            xLabel: 'second',
            yLabel,
            series: series.map((x, k) => ({ name: x.name, color: LINE_COLORS[k] ?? '#888', points: x.values.map((v, i) => [i + 1, v] as [number, number]) })),
          }),
        });
      };
      chart('checks', 'Version checks per second', 'checks/s', [{ name: 'version checks (at the clients)', values: checks }]);
      chart('latency', 'Ingest latency per second', 'ms', [
        { name: 'ingest p99', values: p99s },
        { name: 'ingest p50', values: latency.map((l) => l.p50) },
        { name: 'load generator stall (max)', values: stalls.map((s) => s.max) },
      ]);
      report.verdicts.push(atMost("busiest second's version checks over the mean", maxChecks / meanChecks, TARGET_MAX_OVER_MEAN, fmt.ratio));
      report.verdicts.push(
        atMost("worst second's ingest p99 over the median second's", Math.max(...p99s.filter(Number.isFinite)) / median(p99s), TARGET_P99_FLATNESS, fmt.ratio),
      );
      report.notes.push(
        ...[
          spikeNote(
            'ingest',
            spikesFromStalls(
              p99s,
              stalls.map((s) => s.max),
            ),
          ),
        ].filter((n): n is string => n !== undefined),
        'The wheel repeats every period: the same users sit in the same slots, so the counts of the second period repeat those of the first.',
        `Version checks: mean ${meanChecks.toFixed(0)}/s (expected ${(users / period).toFixed(0)}/s: ${users} users ÷ ${period} s), max ${maxChecks}/s. Ingest: ${ingest.ok} of ${ingest.started} POSTs answered 200; the load generator fell up to ${ingest.maxLagMs.toFixed(0)} ms behind its schedule.`,
        'The targets `≤ 1.5×` (checks) and `≤ 2×` (p99) are this bench\'s reading of "flat"; the issue gives no number.',
      );
      report.data = { users, period, connectSeconds, checks, ingest: latency, store };
      return report;
    } finally {
      for (const c of clients) c.close();
      await system.stop();
    }
  },
};

/** A bucket bound in ms; past the last finite bucket (0.5 s) all a histogram says is "more". */
function bucketMs(ms: number): string {
  return ms === Number.POSITIVE_INFINITY ? '> 500' : fmtMs(ms);
}
