/**
 * `npm run bench [-- --quick] [--only ...]`: notify latency (Redpoint on both engines vs raw uWS,
 * raw Redis and Socket.IO, same load, same run), ingest throughput (autocannon), then the
 * scenarios of bench/sections.ts (memory, store cost, saturation, reconnect, ...), each starting
 * what it needs. Prints the tables and writes bench/reports/<name>.{md,svg,json}.
 */
import { loadavg } from 'node:os';
import { parseBenchArgs } from './lib/args.js';
import { writeReports } from './lib/output.js';
import type { IngestResult, NotifyResult } from './lib/results.js';
import type { SectionContext, SectionReport } from './lib/section.js';
import { fmtMs } from './lib/table.js';
import { makePlan } from './plan.js';
import { runIngestRounds } from './scenarios/ingest-rounds.js';
import { runScenario } from './scenarios/notify-rounds.js';
import { type RunningSystem, SYSTEMS, type SystemId, startSystem } from './systems.js';

const log = (line: string): void => void process.stderr.write(`${line}\n`);

const options = parseBenchArgs(process.argv.slice(2));
const plan = makePlan(options);
const started = performance.now();
const loadAtStart = loadavg()[0] ?? NaN;
const running = new Map<SystemId, RunningSystem>();
const stopAll = async (): Promise<void> => {
  await Promise.allSettled([...running.values()].map((s) => s.stop()));
  running.clear();
};
process.once('SIGINT', () => {
  log('interrupted: stopping servers');
  void stopAll().finally(() => process.exit(130));
});
const pick = (ids: readonly SystemId[]): RunningSystem[] => ids.flatMap((id) => running.get(id) ?? []);

const notify: NotifyResult[] = [];
const ingest: IngestResult[] = [];
/** A failed scenario is reported and skipped, so one crash does not cost the whole run. */
const failures: string[] = [];
const failed = (what: string, err: unknown): void => {
  const message = `${what} failed: ${err instanceof Error ? err.message : String(err)}`;
  failures.push(message);
  log(`!! ${message}`);
};
try {
  if (plan.systems.length > 0) log(`starting ${plan.systems.join(', ')}`);
  const starts = await Promise.allSettled(plan.systems.map(async (id) => running.set(id, await startSystem(SYSTEMS[id]))));
  const refused = starts.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (refused) throw refused.reason;

  const timing = { warmupSeconds: options.warmupSeconds, seconds: options.seconds, rounds: options.rounds, drainMs: 5000 };
  for (const run of plan.notify) {
    const t = performance.now();
    log(`notify ${run.scenario.id}: ${run.systems.join(', ')}`);
    const results = await runScenario(pick(run.systems), run.scenario, timing, log).catch((err: unknown) => {
      failed(`notify ${run.scenario.id}`, err);
      return [];
    });
    notify.push(...results);
    for (const r of results) {
      log(`  ${r.system.padEnd(16)} p50 ${fmtMs(r.latency.p50)}  p99 ${fmtMs(r.latency.p99)} ms  ${r.delivered}/${r.expected} delivered`);
    }
    log(`  (${((performance.now() - t) / 1000).toFixed(1)} s)`);
  }
  if (plan.ingest.systems.length > 0) {
    log(`ingest: ${plan.ingest.systems.join(', ')}`);
    const ingestTiming = {
      warmupSeconds: options.ingestWarmupSeconds,
      seconds: options.ingestSeconds,
      rounds: options.ingestRounds,
      connections: options.connections,
      conversations: 1000,
    };
    const results = await runIngestRounds(pick(plan.ingest.systems), plan.ingest.batches, ingestTiming, log).catch((err: unknown) => {
      failed('ingest', err);
      return [];
    });
    ingest.push(...results);
  }
} finally {
  await stopAll();
}

const sections: SectionReport[] = [];
const shared = new Map<string, Promise<unknown>>();
const context: SectionContext = {
  options,
  log,
  once<T>(key: string, make: () => Promise<T>): Promise<T> {
    let p = shared.get(key) as Promise<T> | undefined;
    if (!p) {
      p = make();
      shared.set(key, p);
    }
    return p;
  },
};
for (const section of plan.sections) {
  const t = performance.now();
  log(`${section.id}: ${section.title} (load average ${(loadavg()[0] ?? NaN).toFixed(1)})`);
  try {
    sections.push(await section.run(context));
  } catch (err) {
    failed(section.id, err);
  }
  log(`  (${((performance.now() - t) / 1000).toFixed(1)} s)`);
}

await writeReports(options, plan, { notify, ingest, sections, failures }, (performance.now() - started) / 1000, loadAtStart);
if (failures.length > 0) process.exitCode = 1;
