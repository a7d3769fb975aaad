import type { IngestResult, NotifyResult, NotifyScenario } from './results.js';

/** Rows shared by the stdout table and the Markdown report. */
export interface Table {
  header: string[];
  rows: string[][];
}

const BASELINE = 'uws-raw';

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '—';
  if (ms < 10) return ms.toFixed(2);
  if (ms < 100) return ms.toFixed(1);
  return ms.toFixed(0);
}

export function fmtRate(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—';
}

function ratio(value: number, base: number | undefined): string {
  if (base === undefined || !Number.isFinite(value) || !Number.isFinite(base) || base <= 0) return '—';
  const r = value / base;
  return `${r < 0.1 ? r.toPrecision(1) : r.toFixed(1)}×`;
}

export function scenarioLabel(s: NotifyScenario): string {
  return s.kind === '1to1' ? `1:1 × ${s.clients} clients @ ${s.rate}/s` : `group of ${s.groupSize} (read diffusion), ${s.clients} online @ ${s.rate}/s`;
}

export function notifyTable(results: readonly NotifyResult[]): Table {
  const header = [
    'scenario',
    'system',
    'msgs/s',
    'pushes/s',
    'p50 ms',
    'p95 ms',
    'p99 ms',
    'p50 vs uWS',
    'p99 vs uWS',
    'delivered',
    'commit batch',
    'gen stall p99/max',
  ];
  const rows = results.map((r) => {
    const base = results.find((b) => b.system === BASELINE && b.scenario.id === r.scenario.id);
    return [
      r.scenario.id,
      r.system,
      fmtRate(r.messagesPerSec),
      fmtRate(r.pushesPerSec),
      fmtMs(r.latency.p50),
      fmtMs(r.latency.p95),
      fmtMs(r.latency.p99),
      ratio(r.latency.p50, base?.latency.p50),
      ratio(r.latency.p99, base?.latency.p99),
      r.expected > 0 ? `${((100 * r.delivered) / r.expected).toFixed(r.delivered === r.expected ? 0 : 2)}%` : '—',
      r.meanCommitBatch === undefined ? '' : r.meanCommitBatch.toFixed(2),
      `${fmtMs(r.loopDelayP99Ms)}/${fmtMs(r.loopDelayMaxMs)}`,
    ];
  });
  return { header, rows };
}

export function ingestTable(results: readonly IngestResult[]): Table {
  const header = ['system', 'batch', 'req/s', 'msgs/s', 'p50 ms', 'p95 ms', 'p99 ms', 'msgs/s vs uWS', 'commit batch', 'errors'];
  const rows = results.map((r) => {
    const base = results.find((b) => b.system === BASELINE && b.batch === r.batch);
    return [
      r.system,
      String(r.batch),
      fmtRate(r.requestsPerSec),
      fmtRate(r.messagesPerSec),
      fmtMs(r.latency.p50),
      fmtMs(r.latency.p95),
      fmtMs(r.latency.p99),
      ratio(r.messagesPerSec, base?.messagesPerSec),
      r.meanCommitBatch === undefined ? '' : r.meanCommitBatch.toFixed(1),
      String(r.errors + r.non2xx),
    ];
  });
  return { header, rows };
}

/** Fixed-width text: text columns left-aligned, numbers right-aligned. */
export function renderText(table: Table): string {
  const widths = table.header.map((h, i) => Math.max(h.length, ...table.rows.map((r) => (r[i] ?? '').length)));
  const numeric = table.header.map((_, i) => table.rows.every((r) => /^[-—\d.,%×/]*$/.test(r[i] ?? '')));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => (numeric[i] ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(table.header), widths.map((w) => '-'.repeat(w)).join('  '), ...table.rows.map(line)].join('\n');
}

export function renderMarkdown(table: Table): string {
  const numeric = table.header.map((_, i) => table.rows.every((r) => /^[-—\d.,%×/]*$/.test(r[i] ?? '')));
  return [`| ${table.header.join(' | ')} |`, `|${numeric.map((n) => (n ? '---:' : '---')).join('|')}|`, ...table.rows.map((r) => `| ${r.join(' | ')} |`)].join(
    '\n',
  );
}
