import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { applyRecords, type RecordTarget, type RecordToApply } from './apply-records.js';
import { type Outcome, reasonOf } from './outcome.js';
import type { QueueMetrics, RetryCause } from './queue-metrics.js';
import { decodeRecord } from './record.js';
import type { DeliveryBatch, QueueSource } from './source.js';

export interface ConsumerOptions {
  /** Records per batch (INGEST_BATCH). */
  batch: number;
  /** How long a record naming an unknown conversation is retried before the dead letter (INGEST_RETRY_SECONDS). */
  retryBudgetMs: number;
}

/** Waiting on a store that does not answer, or a queue that cannot be read: doubling up to this. */
const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 5_000;
/**
 * While a batch is in hand it is kept alive this often: one store call may take up to the store
 * timeout, longer than a queue's ack wait, and a record redelivered meanwhile would be applied
 * twice at once (harmless) and leave its first delivery unanswerable.
 */
const KEEP_ALIVE_MS = 3_000;

/**
 * Pulls batches from one source and applies them through the ingest path HTTP uses, one batch at
 * a time: while the store is slow the next batch waits, while it does not answer the batch is
 * held (kept alive at the queue) and tried again with backoff, so nothing piles up in memory and
 * nothing is settled before the store applied it. A batch is settled only with final outcomes:
 * applied (deleted / acked), dead (dead letter, with its reason), retry (offered again later).
 */
export class QueueConsumer {
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;

  constructor(
    private readonly source: QueueSource,
    private readonly target: RecordTarget,
    private readonly metrics: QueueMetrics,
    private readonly log: Logger,
    private readonly options: ConsumerOptions,
  ) {}

  start(): void {
    this.running ??= this.run();
  }

  /** Stops pulling; the batch in hand is finished (settled) or, while the store does not answer, released. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }

  private async run(): Promise<void> {
    const { signal } = this.abort;
    let pause = FIRST_PAUSE_MS;
    while (!signal.aborted) {
      try {
        const batch = await this.source.next(this.options.batch, signal);
        if (!batch) continue;
        await this.process(batch);
        pause = FIRST_PAUSE_MS;
      } catch (err) {
        // The queue itself is in trouble (connection lost, settle refused): whatever was not
        // settled is redelivered; applying it again is harmless.
        this.log.warn(
          { event: 'ingest_queue_error', source: this.source.name, err: reasonOf(err) },
          `queue ${this.source.name}: ${reasonOf(err)}; trying again`,
        );
        await pauseFor(pause, signal);
        pause = Math.min(pause * 2, MAX_PAUSE_MS);
      }
    }
  }

  private async process(batch: DeliveryBatch): Promise<void> {
    let lost: unknown;
    const ticker = setInterval(() => {
      batch.keepAlive().catch((err: unknown) => (lost = err));
    }, KEEP_ALIVE_MS);
    try {
      await this.work(batch);
    } finally {
      clearInterval(ticker);
    }
    if (lost !== undefined)
      this.log.warn(
        { event: 'ingest_hold_lost', source: this.source.name, err: reasonOf(lost) },
        `queue ${this.source.name}: lost the hold on a batch: ${reasonOf(lost)}`,
      );
  }

  private async work(batch: DeliveryBatch): Promise<void> {
    const { signal } = this.abort;
    const source = this.source.name;
    const outcomes: (Outcome | undefined)[] = new Array(batch.deliveries.length);
    let pending: { index: number; item: RecordToApply }[] = [];
    batch.deliveries.forEach((delivery, index) => {
      try {
        pending.push({ index, item: { record: decodeRecord(delivery.body()), attempts: delivery.attempts } });
      } catch (err) {
        outcomes[index] = { kind: 'dead', reason: reasonOf(err) };
      }
    });
    let pause = FIRST_PAUSE_MS;
    while (pending.length > 0) {
      const attempts = await applyRecords(
        this.target,
        pending.map((p) => p.item),
        this.options.retryBudgetMs,
      );
      const held: typeof pending = [];
      let troubled: unknown;
      attempts.forEach((attempt, k) => {
        const p = pending[k] as (typeof pending)[number];
        if (attempt.kind === 'done') outcomes[p.index] = attempt.outcome;
        else {
          held.push(p);
          troubled = attempt.err;
        }
      });
      pending = held;
      if (held.length === 0) break;
      this.metrics.retries.inc({ source, cause: 'store' }, held.length);
      if (signal.aborted) {
        // Shutting down while the store does not answer: give them back for another process.
        await batch.release();
        return;
      }
      if (pause === FIRST_PAUSE_MS) {
        this.log.warn(
          { event: 'ingest_store_wait', source, held: held.length, err: reasonOf(troubled) },
          `queue ${source}: the store did not apply ${held.length} records (${reasonOf(troubled)}); holding them and pulling nothing more until it does`,
        );
      }
      await pauseFor(pause, signal);
      pause = Math.min(pause * 2, MAX_PAUSE_MS);
      if (signal.aborted) {
        await batch.release();
        return;
      }
      await batch.keepAlive();
    }
    const final = outcomes.map((o) => o ?? { kind: 'dead' as const, reason: 'internal: no outcome' });
    await batch.settle(final);
    this.count(final);
  }

  private count(outcomes: readonly Outcome[]): void {
    const source = this.source.name;
    const n = { applied: 0, dead: 0, retry: 0 };
    const causes = new Map<RetryCause, number>();
    for (const o of outcomes) {
      n[o.kind] += 1;
      if (o.kind === 'dead')
        this.log.warn({ event: 'ingest_dead_letter', source, reason: o.reason }, `queue ${source}: record to the dead letter: ${o.reason}`);
      if (o.kind === 'retry') {
        const cause: RetryCause = o.reason.startsWith('unknown_conversation') ? 'unknown_conversation' : 'error';
        causes.set(cause, (causes.get(cause) ?? 0) + 1);
      }
    }
    for (const outcome of ['applied', 'dead', 'retry'] as const) if (n[outcome] > 0) this.metrics.records.inc({ source, outcome }, n[outcome]);
    if (n.dead > 0) this.metrics.deadLetters.inc({ source }, n.dead);
    for (const [cause, count] of causes) this.metrics.retries.inc({ source, cause }, count);
  }
}

async function pauseFor(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, undefined, { signal }).catch(() => undefined);
}
