import { RedpointError } from '../../protocol/errors.js';
import { StoreError } from '../engine/store-errors.js';

/**
 * What became of one delivered record. `applied` and `dead` are final (the source deletes or acks
 * it); `retry` is a record that may apply later (its conversation or membership is not there yet,
 * or an unexpected error): the source keeps it and offers it again after `delayMs`, until the
 * retry budget is spent and it goes to the dead letter. Store trouble is none of these: the
 * consumer holds the record and tries again once the store answers (consumer.ts).
 */
export type Outcome = { kind: 'applied' } | { kind: 'dead'; reason: string } | { kind: 'retry'; reason: string; delayMs: number };

/** A failure the consumer waits out with the record in hand: the store did not apply it. */
export function isStoreTrouble(err: unknown): boolean {
  if (err instanceof StoreError) return true;
  return err instanceof RedpointError && (err.code === 'unavailable' || err.code === 'outcome_unknown');
}

/** Refusals the same record will always get: retrying cannot help. */
export function isPermanent(err: unknown): boolean {
  return (
    err instanceof RedpointError && (err.code === 'invalid_request' || err.code === 'bad_json' || err.code === 'seq_jump' || err.code === 'limit_exceeded')
  );
}

export function reasonOf(err: unknown): string {
  if (err instanceof RedpointError) return `${err.code}: ${err.message}`;
  if (err instanceof Error) return `internal: ${err.message}`;
  return `internal: ${String(err)}`;
}

const RETRY_FIRST_DELAY_MS = 250;
const RETRY_MAX_DELAY_MS = 30_000;

/**
 * Backoff of a record retried for the `attempts`-th time (1 after its first failure): doubling
 * from 250 ms up to 30 s, for as long as the delays so far add up to less than `budgetMs`; then
 * null (dead letter). Every source counts attempts the same way, so one budget means the same
 * time whichever queue the record came through.
 */
export function retryDelay(attempts: number, budgetMs: number): number | null {
  let spent = 0;
  let delay = RETRY_FIRST_DELAY_MS;
  for (let n = 1; n < attempts; n++) {
    spent += delay;
    delay = Math.min(delay * 2, RETRY_MAX_DELAY_MS);
  }
  return spent >= budgetMs ? null : delay;
}
