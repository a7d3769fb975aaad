import type { BenchOptions } from './args.js';
import { renderMarkdown, renderText, type Table } from './table.js';

/**
 * A scenario beyond the notify-latency and ingest tables: one job (memory per user, store cost,
 * saturation, ...), run on its own, reported as tables, targets and notes. Every section renders
 * the same way, on stdout and in the Markdown report; its raw figures go to the JSON report.
 */
export interface Section {
  readonly id: string;
  readonly title: string;
  /** Part of `npm run bench` without `--only` (a scenario waiting on a server feature is not). */
  readonly inDefaultPlan: boolean;
  run(ctx: SectionContext): Promise<SectionReport>;
}

export interface SectionContext {
  readonly options: BenchOptions;
  log(line: string): void;
  /** Runs `make` once per key for the whole bench run (two sections reading one profiled run). */
  once<T>(key: string, make: () => Promise<T>): Promise<T>;
}

/** A figure with its target from the issue, and whether this run met it. */
export interface Verdict {
  what: string;
  value: string;
  target: string;
  /** Undefined: not measurable in this run (say why in `value`). */
  met: boolean | undefined;
}

export interface SectionReport {
  id: string;
  title: string;
  /** What was run and how it is measured (Markdown paragraphs). */
  method: string[];
  tables: Array<{ caption: string; table: Table }>;
  verdicts: Verdict[];
  notes: string[];
  /** SVG charts, written next to the report as `<report>-<id>-<name>.svg`. */
  charts: Array<{ name: string; title: string; svg: string }>;
  /** Raw figures for the JSON report. */
  data: unknown;
}

export function emptyReport(id: string, title: string): SectionReport {
  return { id, title, method: [], tables: [], verdicts: [], notes: [], charts: [], data: {} };
}

/** `value ≤ limit`: a cost target. */
export function atMost(what: string, value: number, limit: number, show: (n: number) => string): Verdict {
  return { what, value: show(value), target: `≤ ${show(limit)}`, met: Number.isFinite(value) ? value <= limit : undefined };
}

/** `value ≥ limit`: a throughput target. */
export function atLeast(what: string, value: number, limit: number, show: (n: number) => string): Verdict {
  return { what, value: show(value), target: `≥ ${show(limit)}`, met: Number.isFinite(value) ? value >= limit : undefined };
}

export function verdictMark(v: Verdict): string {
  return v.met === undefined ? 'not measured' : v.met ? 'met' : 'NOT MET';
}

export function verdictLine(v: Verdict): string {
  return `${v.what}: ${v.value} (target ${v.target}) — **${verdictMark(v)}**`;
}

export function renderSectionText(s: SectionReport): string {
  const out = [`\n== ${s.title} ==`];
  for (const t of s.tables) out.push(`\n${t.caption}\n${renderText(t.table)}`);
  if (s.verdicts.length > 0) out.push('', ...s.verdicts.map((v) => `target: ${verdictLine(v).replace(/\*\*/g, '')}`));
  for (const n of s.notes) out.push(`note: ${n}`);
  return out.join('\n');
}

export function renderSectionMarkdown(s: SectionReport, chartFile: (name: string) => string): string {
  const out = [`## ${s.title}`, ''];
  for (const p of s.method) out.push(p, '');
  if (s.verdicts.length > 0) out.push(...s.verdicts.map((v) => `- ${verdictLine(v)}`), '');
  for (const t of s.tables) out.push(`**${t.caption}**`, '', renderMarkdown(t.table), '');
  for (const c of s.charts) out.push(`![${c.title}](${chartFile(c.name)})`, '');
  if (s.notes.length > 0) out.push(...s.notes.map((n) => `- ${n}`), '');
  return out.join('\n');
}

/** Formatting shared by the sections' tables. */
export const fmt = {
  us: (n: number): string => (!Number.isFinite(n) ? '—' : n < 10 ? `${n.toFixed(2)} µs` : n < 100 ? `${n.toFixed(1)} µs` : `${n.toFixed(0)} µs`),
  bytes: (n: number): string =>
    !Number.isFinite(n) ? '—' : n < 10_000 ? `${n.toFixed(0)} B` : n < 10_000_000 ? `${(n / 1024).toFixed(0)} KiB` : `${(n / 1048576).toFixed(0)} MiB`,
  ratio: (n: number): string => (!Number.isFinite(n) ? '—' : `${n < 0.1 ? n.toPrecision(1) : n.toFixed(2)}×`),
  pct: (n: number): string => (!Number.isFinite(n) ? '—' : `${(100 * n).toFixed(n < 0.001 ? 3 : n < 0.1 ? 2 : 1)}%`),
  seconds: (n: number): string => (!Number.isFinite(n) ? '—' : n < 10 ? `${n.toFixed(2)} s` : `${n.toFixed(1)} s`),
  int: (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—'),
};
