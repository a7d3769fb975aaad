import type { HttpReply } from './http.js';

/**
 * Why operations failed, counted by reason ("ECONNRESET (reused socket, no reply byte)", "503
 * {"error":"store_timeout"...}"), so a report can say what the failures were instead of how many.
 */
export class FailureReasons {
  private readonly counts = new Map<string, number>();

  add(reason: string, n = 1): void {
    if (n > 0) this.counts.set(reason, (this.counts.get(reason) ?? 0) + n);
  }

  /** A non-200 reply: its status and the start of its body. */
  reply(reply: HttpReply): void {
    this.add(replyReason(reply));
  }

  /** A rejected request: the error's code (or message). */
  error(err: unknown): void {
    this.add(errorReason(err));
  }

  get total(): number {
    let n = 0;
    for (const c of this.counts.values()) n += c;
    return n;
  }

  /** Most frequent first. */
  entries(): Array<{ reason: string; count: number }> {
    return [...this.counts].map(([reason, count]) => ({ reason, count })).sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason));
  }

  /** "12 × ECONNRESET (…), 5 × 503 …", or "" when nothing failed. */
  summary(): string {
    return this.entries()
      .map((e) => `${e.count} × ${e.reason}`)
      .join(', ');
  }
}

const BODY_BYTES = 100;

export function replyReason(reply: HttpReply): string {
  const body = reply.body.replace(/\s+/g, ' ').trim();
  const head = Buffer.byteLength(body) > BODY_BYTES ? `${Buffer.from(body).subarray(0, BODY_BYTES).toString()}…` : body;
  return head ? `${reply.status} ${head}` : `${reply.status}`;
}

export function errorReason(err: unknown): string {
  if (!(err instanceof Error)) return `rejected: ${String(err).slice(0, BODY_BYTES)}`;
  const e = err as Error & { code?: unknown; reusedSocket?: unknown; replyStarted?: unknown };
  const what = typeof e.code === 'string' ? e.code : e.message.slice(0, BODY_BYTES);
  const where: string[] = [];
  if (typeof e.reusedSocket === 'boolean') where.push(e.reusedSocket ? 'reused socket' : 'new socket');
  if (typeof e.replyStarted === 'boolean') where.push(e.replyStarted ? 'after reply bytes' : 'no reply byte');
  return where.length > 0 ? `${what} (${where.join(', ')})` : what;
}
