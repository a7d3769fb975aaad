import { readdirSync } from 'node:fs';
import { CpuWindow, processTree } from '../lib/proc.js';
import { emptyReport, fmt, type Section } from '../lib/section.js';
import { fmtRate } from '../lib/table.js';
import { type RunningSystem, SYSTEMS, startSystem } from '../systems.js';
import { IngestSession } from './ingest.js';
import { DIRECT_LOAD } from './saturation.js';
import { directAudience, SaturationSession } from './saturation-session.js';

interface WorkersResult {
  workers: number;
  /** What shows the server runs that many workers (or that it does not). */
  evidence: string;
  honoured: boolean;
  ingestPerSec: number;
  ingestCores: number;
  deliveriesPerSec: number;
  notifyCores: number;
}

/**
 * Ingest and notify throughput at WORKERS=1 and WORKERS=2 (several uWS workers serving one port
 * on the Redis engine). Whether the server honours WORKERS is checked, not assumed: its startup
 * log and /metrics are searched for a worker count, else its process tree and thread count are
 * compared with the WORKERS=1 server's.
 */
export const workersSection: Section = {
  id: 'workers',
  title: 'WORKERS=1 vs WORKERS=2 — ingest and notify throughput',
  // The server honours WORKERS since main's 39276e4; the evidence column still checks each run.
  inDefaultPlan: true,
  async run(ctx) {
    const seconds = ctx.options.quick ? 3 : 8;
    const clients = ctx.options.quick ? 500 : 2000;
    const report = emptyReport(this.id, this.title);
    const results: WorkersResult[] = [];
    let baseline: { processes: number; threads: number } | undefined;
    for (const workers of [1, 2]) {
      const system = await startSystem(SYSTEMS['redpoint-redis'], {
        env: { WORKERS: String(workers), LOG_LEVEL: 'info' },
        name: `redpoint-redis WORKERS=${workers}`,
      });
      try {
        const shape = { processes: processTree(system.pid).length, threads: threadCount(system.pid) };
        baseline ??= shape;
        const found = await workerEvidence(system, workers, shape, baseline);
        const ingest = await IngestSession.open(system, 1000, 32, 'wk');
        await ingest.run(1, 1, false);
        const cpu = new CpuWindow(system.pid).start();
        await ingest.run(1, seconds, true);
        const ingestCpu = cpu.stop();
        const session = await SaturationSession.open(system, (http) => directAudience(http, 'wn', clients), DIRECT_LOAD);
        try {
          await session.drive(1, false);
          await session.drive(seconds, true);
        } finally {
          session.close();
        }
        const notify = session.result();
        results.push({
          workers,
          ...found,
          ingestPerSec: ingest.result(1)?.messagesPerSec ?? NaN,
          ingestCores: ingestCpu.cores,
          deliveriesPerSec: notify.deliveriesPerSec,
          notifyCores: notify.serverCores,
        });
        ctx.log(`  workers: WORKERS=${workers} measured (${found.evidence})`);
      } finally {
        await system.stop();
      }
    }
    const one = results.find((r) => r.workers === 1);
    report.method.push(
      `One Redpoint server on the Redis engine (its own redis-server) started with WORKERS=1, then with WORKERS=2. Ingest: autocannon, 32 connections, one message per request to 1:1 conversations, ${seconds} s. Notify: scenario \`notify-saturation\`'s one-to-one load (${clients} clients, 256 messages in flight, 16 per POST), ${seconds} s. Server cores: CPU of the server's whole process tree (workers included) ÷ wall time.`,
    );
    report.tables.push({
      caption: 'Throughput by worker count',
      table: {
        header: ['WORKERS', 'honoured', 'evidence', 'ingest msgs/s', 'vs 1', 'server cores', 'deliveries/s', 'vs 1', 'server cores'],
        rows: results.map((r) => [
          String(r.workers),
          r.honoured ? 'yes' : 'NO',
          r.evidence,
          fmtRate(r.ingestPerSec),
          fmt.ratio(r.ingestPerSec / (one?.ingestPerSec ?? NaN)),
          r.ingestCores.toFixed(2),
          fmtRate(r.deliveriesPerSec),
          fmt.ratio(r.deliveriesPerSec / (one?.deliveriesPerSec ?? NaN)),
          r.notifyCores.toFixed(2),
        ]),
      },
    });
    const two = results.find((r) => r.workers === 2);
    if (two && !two.honoured)
      report.notes.push(
        '**The server does not honour WORKERS=2** (no worker count in its log or /metrics, and no more processes or threads than with WORKERS=1): both rows measure one worker.',
      );
    report.notes.push(
      'On this 2-core machine the load generator, redis-server and the workers share two cores: a second worker can add at most what the cores left over allow.',
    );
    report.data = results;
    return report;
  },
};

function threadCount(pid: number): number {
  return processTree(pid).reduce((n, p) => {
    try {
      return n + readdirSync(`/proc/${p}/task`).length;
    } catch {
      return n;
    }
  }, 0);
}

async function workerEvidence(
  system: RunningSystem,
  workers: number,
  shape: { processes: number; threads: number },
  baseline: { processes: number; threads: number },
): Promise<{ evidence: string; honoured: boolean }> {
  // The startup log states the effective count (`"workers":N` in its config); a gauge of workers
  // in /metrics would do too.
  const said = /"workers":\s*(\d+)/.exec(system.output());
  if (said) return { evidence: `startup log: workers ${said[1]}`, honoured: Number(said[1]) === workers };
  const metrics = await system.http.expectOk('GET', '/metrics');
  const metricLine = metrics.split('\n').find((l) => !l.startsWith('#') && /^redpoint_workers?\b/i.test(l));
  if (metricLine) return { evidence: `/metrics: ${metricLine.trim()}`, honoured: Number(metricLine.slice(metricLine.lastIndexOf(' ') + 1)) === workers };
  if (workers === 1) return { evidence: `${shape.processes} process(es), ${shape.threads} threads`, honoured: true };
  if (shape.processes > baseline.processes) return { evidence: `${shape.processes} processes (WORKERS=1: ${baseline.processes})`, honoured: true };
  if (shape.threads > baseline.threads) return { evidence: `${shape.threads} threads (WORKERS=1: ${baseline.threads})`, honoured: true };
  return { evidence: `no worker count in log or /metrics; ${shape.processes} process, ${shape.threads} threads as with WORKERS=1`, honoured: false };
}
