import type { HttpTarget } from './http.js';

export interface CommitCounters {
  sum: number;
  count: number;
}

/** Reads Redpoint's group-commit histogram (`redpoint_group_commit_batch_messages`) from /metrics. */
export async function readCommitCounters(http: HttpTarget): Promise<CommitCounters> {
  const text = await http.expectOk('GET', '/metrics');
  return { sum: sample(text, 'redpoint_group_commit_batch_messages_sum'), count: sample(text, 'redpoint_group_commit_batch_messages_count') };
}

/** Mean messages per flush between two readings. */
export function meanBatch(before: CommitCounters, after: CommitCounters): number | undefined {
  const flushes = after.count - before.count;
  return flushes > 0 ? (after.sum - before.sum) / flushes : undefined;
}

function sample(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  const value = line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : NaN;
  if (!Number.isFinite(value)) throw new Error(`/metrics has no ${name}`);
  return value;
}

/** The sum of every sample of `name` whose labels include all of `labels` (0 when there is none). */
export function labelledSum(text: string, name: string, labels: Readonly<Record<string, string>>): number {
  let sum = 0;
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labelText = line.slice(name.length, line.lastIndexOf(' '));
    if (wanted.every((w) => labelText.includes(w))) sum += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  }
  return sum;
}

/** Cumulative bucket counts of a Prometheus histogram (`<name>_bucket`) whose labels include `labels`, by `le`. */
export function histogramBuckets(text: string, name: string, labels: Readonly<Record<string, string>>): Map<number, number> {
  const out = new Map<number, number>();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}_bucket{`)) continue;
    const labelText = line.slice(name.length, line.lastIndexOf(' '));
    if (!wanted.every((w) => labelText.includes(w))) continue;
    const le = /le="([^"]+)"/.exec(labelText)?.[1];
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
    out.set(bound, (out.get(bound) ?? 0) + (Number(line.slice(line.lastIndexOf(' ') + 1)) || 0));
  }
  return out;
}

/**
 * The q-quantile of what a histogram observed between two readings, as the upper bound of the
 * bucket it falls in (coarse: the buckets' resolution). NaN when nothing was observed.
 */
export function quantileBetween(before: Map<number, number>, after: Map<number, number>, q: number): { value: number; count: number } {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const total = (after.get(Number.POSITIVE_INFINITY) ?? 0) - (before.get(Number.POSITIVE_INFINITY) ?? 0);
  if (total <= 0) return { value: NaN, count: 0 };
  for (const b of bounds) {
    if ((after.get(b) ?? 0) - (before.get(b) ?? 0) >= q * total) return { value: b, count: total };
  }
  return { value: Number.POSITIVE_INFINITY, count: total };
}
