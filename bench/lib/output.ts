import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import type { Plan } from '../plan.js';
import { SYSTEMS } from '../systems.js';
import type { BenchOptions } from './args.js';
import { PROJECT_ROOT } from './child-server.js';
import { chartOf, markdownReport } from './report.js';
import type { BenchEnvironment, BenchResults, IngestResult, NotifyResult } from './results.js';
import { renderSectionText, type SectionReport } from './section.js';
import { renderBarChart } from './svg-chart.js';
import { ingestTable, notifyTable, renderText } from './table.js';

/** Prints the tables to stdout and writes bench/reports/<out>.{md,svg,json}. */
export async function writeReports(
  options: BenchOptions,
  plan: Plan,
  { notify, ingest, sections, failures }: { notify: NotifyResult[]; ingest: IngestResult[]; sections: SectionReport[]; failures: string[] },
  wallSeconds: number,
  loadAtStart: number,
): Promise<void> {
  const rank = (id: string): number => (plan.systems as readonly string[]).indexOf(id);
  const scenarioRank = (id: string): number => plan.notify.findIndex((r) => r.scenario.id === id);
  notify.sort((a, b) => scenarioRank(a.scenario.id) - scenarioRank(b.scenario.id) || rank(a.system) - rank(b.system));
  ingest.sort((a, b) => a.batch - b.batch || rank(a.system) - rank(b.system));
  const results: BenchResults = { env: environment(options, plan, loadAtStart), notify, ingest, sections, failures, wallSeconds };

  if (notify.length > 0) console.log(`\nNotify latency (POST sent → push received)\n${renderText(notifyTable(notify))}`);
  if (ingest.length > 0) console.log(`\nIngest throughput (autocannon, ${options.connections} connections)\n${renderText(ingestTable(ingest))}`);
  for (const s of sections) console.log(renderSectionText(s));
  const dir = join(PROJECT_ROOT, 'bench', 'reports');
  await mkdir(dir, { recursive: true });
  const systems = plan.systems.map((id) => ({ id, what: SYSTEMS[id].what }));
  const chartFile = (section: string, name: string): string => `${options.out}-${section}-${name}.svg`;
  if (notify.length > 0 || ingest.length > 0) await writeFile(join(dir, `${options.out}.svg`), renderBarChart(chartOf(results)));
  for (const s of sections) for (const c of s.charts) await writeFile(join(dir, chartFile(s.id, c.name)), c.svg);
  await writeFile(join(dir, `${options.out}.md`), markdownReport(results, systems, `${options.out}.svg`, chartFile));
  await writeFile(join(dir, `${options.out}.json`), `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\nreport: bench/reports/${options.out}.md (+ .svg, .json), ${wallSeconds.toFixed(0)} s in all`);
}

function environment(o: BenchOptions, plan: Plan, loadAtStart: number): BenchEnvironment {
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: PROJECT_ROOT, timeout: 5000 }).toString().trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: PROJECT_ROOT, timeout: 5000 }).toString().trim();
    if (dirty) commit += ' + uncommitted changes';
  } catch {
    // Not a git checkout: the report says "unknown".
  }
  return {
    date: `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    node: process.versions.node,
    cpu: cpus()[0]?.model.trim() ?? 'unknown CPU',
    cores: cpus().length,
    commit,
    mode: o.quick ? 'quick' : 'default',
    loadAverage: [loadAtStart, loadavg()[0] ?? NaN],
    settings: {
      ...(plan.notify.length > 0
        ? {
            'notify: measured seconds per system and scenario': `${o.seconds} (in ${o.rounds} interleaved rounds)`,
            'notify: warm-up seconds per system and scenario': o.warmupSeconds,
            'notify: clients (scales)': o.scales.join(', '),
            'notify: 1:1 rate (messages/s)': o.rate,
            'notify: group rate (messages/s)': o.groupRate,
            'notify: group size (members)': o.groupSize,
          }
        : {}),
      ...(plan.ingest.systems.length > 0
        ? {
            'ingest: seconds per system and batch': `${o.ingestSeconds} (in ${o.ingestRounds} interleaved rounds)`,
            'ingest: autocannon connections': o.connections,
          }
        : {}),
      'large-group threshold (read diffusion above)': 500,
      'other scenarios': plan.sections.map((s) => s.id).join(', ') || 'none',
      ...(plan.sections.some((s) => s.id === 'sweep') ? { 'sweep: users, WS_VERSION_EVERY_SECONDS': `${o.sweepUsers}, ${o.sweepPeriodSeconds}` } : {}),
      ...(plan.sections.some((s) => s.id === 'soak') ? { 'soak: seconds per engine': o.soakSeconds } : {}),
    },
  };
}
