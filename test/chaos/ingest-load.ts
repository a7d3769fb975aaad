import { expect } from 'vitest';
import type { UnreadSummary } from '../../protocol/types.js';
import { isEqual } from '../helpers/equal.js';
import { TEST_API_KEY } from '../helpers/test-server.js';
import { Model } from '../http/model.js';

/** One write-diffused conversation of the load: two members taking turns as sender. */
export interface LoadConversation {
  conv: string;
  members: [string, string];
}

export function conversations(count: number, tag: string): LoadConversation[] {
  return Array.from({ length: count }, (_, i) => ({ conv: `${tag}${i}`, members: [`${tag}${i}a`, `${tag}${i}b`] }));
}

/** What the message service saw, for the suite's printed figures. */
export interface LoadFigures {
  acked: number;
  attempts: number;
  /** Answers and failures by status (`200`, `503 outcome_unknown`, `ECONNREFUSED`...). */
  byStatus: Record<string, number>;
  /** Slowest non-200 answer: the bound on how long a failure takes to be reported. */
  slowestFailureMs: number;
  /** From the start of the first failed attempt to the first 200 after the last failure (0: no failure). */
  outageMs: number;
}

const REQUEST_TIMEOUT_MS = 20_000;

/**
 * The message service under test conditions: `workers` loops, each posting the next message of
 * its own conversations (dense seqs, one at a time per conversation) and, as PROTOCOL.md asks,
 * retrying the same message after any failure until it gets a 200 (every write is idempotent).
 * Bounded by the caller (`stop()`); everything it was told is kept to check against the store.
 */
export class IngestLoad {
  /** Highest seq acknowledged (200) per conversation. */
  readonly acked = new Map<string, number>();
  /** Highest seq ever sent per conversation (acknowledged or not). */
  readonly sent = new Map<string, number>();
  private readonly byStatus: Record<string, number> = {};
  /** When each attempt failed with a connection error (a DROPPED status), in order. */
  readonly connectionErrors: Array<{ status: string; at: number }> = [];
  private ackedCount = 0;
  private attempts = 0;
  private slowestFailureMs = 0;
  private firstFailure: number | undefined;
  private lastFailure: number | undefined;
  private recoveredAt: number | undefined;
  private stopping = false;
  private inFlightCount = 0;
  private running: Promise<void>[] = [];
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly url: () => string,
    private readonly convs: readonly LoadConversation[],
    private readonly workers: number,
    /** Pause before a retry (a real service would honour Retry-After; kept short to keep the suite fast). */
    private readonly retryDelayMs = 50,
  ) {}

  start(): void {
    for (let w = 0; w < this.workers; w++) {
      const mine = this.convs.filter((_, i) => i % this.workers === w);
      this.running.push(this.work(mine));
    }
  }

  /** Lets each worker finish the message in hand (retrying it until acknowledged), then resolves. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
  }

  get workerCount(): number {
    return this.workers;
  }

  get ackedSoFar(): number {
    return this.ackedCount;
  }

  /** Requests sent and not answered yet (a fault that strikes now strikes these). */
  get inFlight(): number {
    return this.inFlightCount;
  }

  /** When the first 200 after the last failure came (undefined: no failure, or none since). */
  get recovered(): number | undefined {
    return this.recoveredAt;
  }

  /** Resolves once `n` messages in all were acknowledged. */
  ackedAtLeast(n: number, timeoutMs = 60_000): Promise<void> {
    return this.until(() => this.ackedCount >= n, timeoutMs, `${n} acknowledged messages (have ${this.ackedCount})`);
  }

  /** Resolves once `n` attempts failed in all. */
  failuresAtLeast(n: number, timeoutMs = 30_000): Promise<void> {
    return this.until(() => this.failures() >= n, timeoutMs, `${n} failed attempts`);
  }

  figures(): LoadFigures {
    const outageMs = this.firstFailure === undefined ? 0 : (this.recoveredAt ?? Date.now()) - this.firstFailure;
    return { acked: this.ackedCount, attempts: this.attempts, byStatus: { ...this.byStatus }, slowestFailureMs: Math.round(this.slowestFailureMs), outageMs };
  }

  private failures(): number {
    return Object.entries(this.byStatus).reduce((n, [status, count]) => (status === '200' ? n : n + count), 0);
  }

  private until(done: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`load: no ${what} within ${timeoutMs} ms; so far ${JSON.stringify(this.figures())}`));
      }, timeoutMs);
      const check = (): void => {
        if (!done()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve();
      };
      this.waiters.add(check);
    });
  }

  private async work(mine: readonly LoadConversation[]): Promise<void> {
    for (let _turn = 0; !this.stopping; _turn++) {
      for (const c of mine) {
        if (this.stopping) return;
        const seq = (this.acked.get(c.conv) ?? 0) + 1;
        const sender = senderOf(c, seq);
        // The same message until it is acknowledged.
        while (!(await this.post(c.conv, seq, sender))) await new Promise((r) => setTimeout(r, this.retryDelayMs));
      }
    }
  }

  /** One attempt; true once acknowledged. */
  private async post(conv: string, seq: number, sender: string): Promise<boolean> {
    this.attempts += 1;
    this.sent.set(conv, Math.max(this.sent.get(conv) ?? 0, seq));
    const started = performance.now();
    const startedAt = Date.now();
    let status: string;
    this.inFlightCount += 1;
    try {
      const res = await fetch(`${this.url()}/v1/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ conv, seq, sender }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      const text = await res.text();
      status = res.status === 200 ? '200' : `${res.status} ${errorCode(text)}`;
    } catch (err) {
      status = networkError(err);
    } finally {
      this.inFlightCount -= 1;
    }
    this.count(status, startedAt, performance.now() - started);
    if (status !== '200') return false;
    this.acked.set(conv, seq);
    this.ackedCount += 1;
    for (const wake of [...this.waiters]) wake();
    return true;
  }

  private count(status: string, startedAt: number, ms: number): void {
    this.byStatus[status] = (this.byStatus[status] ?? 0) + 1;
    const now = Date.now();
    if (status === '200') {
      if (this.lastFailure !== undefined && (this.recoveredAt === undefined || this.recoveredAt < this.lastFailure)) this.recoveredAt = now;
      return;
    }
    if (DROPPED.includes(status)) this.connectionErrors.push({ status, at: now });
    this.slowestFailureMs = Math.max(this.slowestFailureMs, ms);
    this.firstFailure = Math.min(this.firstFailure ?? startedAt, startedAt);
    this.lastFailure = now;
    for (const wake of [...this.waiters]) wake();
  }
}

function errorCode(text: string): string {
  try {
    return (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? '';
  } catch {
    return '(not JSON)';
  }
}

/**
 * ECONNREFUSED (nothing listens: not accepted), ECONNRESET / UND_ERR_SOCKET (the connection went:
 * the request was dropped, or never read if the server was closing its connections)...
 */
function networkError(err: unknown): string {
  const cause = (err as { cause?: { code?: string; name?: string } }).cause;
  return cause?.code ?? cause?.name ?? (err instanceof Error ? err.name : 'error');
}

/** Statuses that mean the connection went with the request in it, without an answer. */
export const DROPPED = ['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE', 'TimeoutError'];

/**
 * Every acknowledged message is in the store: for each conversation, the head a member sees is at
 * least the highest acknowledged seq (and never beyond the highest sent). Returns the conversations
 * that lost acknowledged messages.
 */
export async function missingAcked(url: string, load: IngestLoad, convs: readonly LoadConversation[]): Promise<string[]> {
  const missing: string[] = [];
  await Promise.all(
    convs.map(async (c) => {
      const res = await fetch(`${url}/v1/users/${c.members[0]}/unread`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
      const body = (await res.json()) as { conversations: Array<{ conv: string; lastSeq: number }> };
      const lastSeq = body.conversations.find((s) => s.conv === c.conv)?.lastSeq ?? 0;
      const acked = load.acked.get(c.conv) ?? 0;
      const sent = load.sent.get(c.conv) ?? 0;
      if (lastSeq < acked || lastSeq > sent) missing.push(`${c.conv}: lastSeq ${lastSeq}, acked ${acked}, sent ${sent}`);
    }),
  );
  return missing;
}

/**
 * Every user's whole unread summary (counts, mentions, totals, categories, each conversation's
 * seqs) equals the reference model (test/http/model.ts, written from the specification) fed what
 * the load was told: per conversation the messages 1..acked, each from the member whose turn it
 * was. A message sent but never acknowledged (only before `stop()`) may or may not have landed:
 * either model is accepted. Returns the users that match neither.
 */
export async function modelMismatches(url: string, load: IngestLoad, convs: readonly LoadConversation[]): Promise<string[]> {
  const modelUpTo = (c: LoadConversation, last: number): Model => {
    const model = new Model(Number.POSITIVE_INFINITY);
    model.changeMembers(c.conv, c.members, []);
    for (let seq = 1; seq <= last; seq++) model.postMessages([{ conv: c.conv, seq, sender: senderOf(c, seq) }]);
    return model;
  };
  const mismatches: string[] = [];
  await Promise.all(
    convs.map(async (c) => {
      const acked = load.acked.get(c.conv) ?? 0;
      const sent = load.sent.get(c.conv) ?? 0;
      const models = [...new Set([acked, sent])].map((last) => modelUpTo(c, last));
      for (const uid of c.members) {
        const res = await fetch(`${url}/v1/users/${uid}/unread`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
        const { uid: _u, epoch: _e, version: _v, ...seen } = (await res.json()) as UnreadSummary;
        if (!models.some((m) => isEqual(seen, m.unread(uid)))) {
          mismatches.push(`${uid} (acked ${acked}, sent ${sent}): ${JSON.stringify(seen)} vs model ${JSON.stringify(models[0]?.unread(uid))}`);
        }
      }
    }),
  );
  return mismatches;
}

/** Who sends `seq` of a load conversation: the members take turns. */
function senderOf(c: LoadConversation, seq: number): string {
  return c.members[seq % 2] ?? c.members[0];
}

/** Creates the conversations (PUT members), retrying until each is acknowledged. */
export async function createConversations(url: string, convs: readonly LoadConversation[]): Promise<void> {
  for (const c of convs) {
    const res = await fetch(`${url}/v1/conversations/${c.conv}/members`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ add: c.members }),
    });
    if (res.status !== 200) throw new Error(`PUT members ${c.conv}: ${res.status} ${await res.text()}`);
  }
}

/** Prints one scenario's figures as one line a CI log reader can grep (`chaos:`). */
export function printFigures(scenario: string, figures: Record<string, unknown>): void {
  console.log(`chaos: ${scenario}: ${JSON.stringify(figures)}`);
}

/**
 * After a store fault: nothing acknowledged is missing, every count equals the model, and every
 * request that failed was answered 503 (unavailable or outcome_unknown), never anything else.
 */
export function expectExactAfterFault(name: string, missing: readonly string[], unmodelled: readonly string[], byStatus: Record<string, number>): void {
  expect(missing, name).toEqual([]);
  expect(unmodelled, `${name}: unread, mentions and totals after the fault equal the model`).toEqual([]);
  const failures = Object.keys(byStatus).filter((s) => s !== '200');
  expect(
    failures.every((s) => s === '503 unavailable' || s === '503 outcome_unknown'),
    `${name}: failures: ${failures.join(', ')}`,
  ).toBe(true);
}
