import { Redis } from 'ioredis';
import type { UserLine } from '../admin/import.js';

export interface LegacyLayout {
  /** redis:// URL of the store holding the counters. */
  url: string;
  /** Key pattern of the per-user hash conv -> count; `*` stands for the uid (default `unread:*`). */
  counters: string;
  /** Key pattern of the per-user total (default `total_unread:*`). */
  totals: string;
}

export interface LegacyUser {
  uid: string;
  counts: Map<string, number>;
  /** The legacy total (null: none stored). */
  total: number | null;
}

export interface LegacyConversion {
  users: number;
  lines: UserLine[];
  /** Users whose stored total is not the sum of their per-conversation counts. */
  inconsistent: { uid: string; total: number; sum: number }[];
  /** Counts of conversations neither the file nor the store knows (skipped). */
  unknown: { uid: string; conv: string; count: number }[];
  /** Counts above the conversation's head (clamped: everything unread). */
  clamped: { uid: string; conv: string; count: number; head: number }[];
  /** Counts that are not non-negative integers (skipped). */
  malformed: { uid: string; conv: string; value: string }[];
}

const SCAN_COUNT = 1_000;

/**
 * Reads the classic layout the seed articles describe — a hash of conv -> unread count per user
 * and a total per user — one SCAN over the counter keys, one HGETALL and GET per user, pipelined.
 */
export async function readLegacyCounters(
  layout: LegacyLayout,
  onUser?: (n: number) => void,
): Promise<{ users: LegacyUser[]; malformed: LegacyConversion['malformed'] }> {
  const star = layout.counters.indexOf('*');
  if (star < 0 || layout.counters.indexOf('*', star + 1) >= 0 || layout.totals.split('*').length !== 2) {
    throw new Error('--counters and --totals take a key pattern with exactly one * (the uid), e.g. unread:* and total_unread:*');
  }
  const [before = '', after = ''] = layout.counters.split('*');
  const redis = new Redis(layout.url, { enableAutoPipelining: true });
  redis.on('error', () => undefined);
  const users: LegacyUser[] = [];
  const malformed: LegacyConversion['malformed'] = [];
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', layout.counters.replace(/[?[\]\\]/g, '\\$&'), 'COUNT', SCAN_COUNT);
      cursor = next;
      const found = keys.filter((k) => k.startsWith(before) && k.endsWith(after) && k.length > before.length + after.length);
      const read = await Promise.all(
        found.map(async (key) => {
          const uid = key.slice(before.length, key.length - after.length);
          const [hash, total] = await Promise.all([redis.hgetall(key), redis.get(layout.totals.replace('*', uid))]);
          const counts = new Map<string, number>();
          for (const [conv, value] of Object.entries(hash)) {
            if (/^\d{1,15}$/.test(value)) counts.set(conv, Number(value));
            else malformed.push({ uid, conv, value });
          }
          return { uid, counts, total: total !== null && /^-?\d{1,15}$/.test(total) ? Number(total) : null };
        }),
      );
      users.push(...read);
      onUser?.(users.length);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return { users, malformed };
}

/** Counts to read positions: `readSeq = head - count` (never below 0), given each conversation's head. */
export function convertCounts(users: readonly LegacyUser[], heads: ReadonlyMap<string, number>, malformed: LegacyConversion['malformed']): LegacyConversion {
  const out: LegacyConversion = { users: users.length, lines: [], inconsistent: [], unknown: [], clamped: [], malformed };
  for (const u of users) {
    let sum = 0;
    for (const [conv, count] of u.counts) {
      sum += count;
      const head = heads.get(conv);
      if (head === undefined) {
        out.unknown.push({ uid: u.uid, conv, count });
        continue;
      }
      if (count > head) out.clamped.push({ uid: u.uid, conv, count, head });
      out.lines.push({ uid: u.uid, conv, readSeq: Math.max(0, head - count) });
    }
    if (u.total !== null && u.total !== sum) out.inconsistent.push({ uid: u.uid, total: u.total, sum });
  }
  return out;
}
