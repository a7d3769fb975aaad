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
