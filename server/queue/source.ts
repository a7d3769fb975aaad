import type { Outcome } from './outcome.js';

/**
 * A queue Redpoint consumes records from. A source knows its queue (how to take records, how to
 * keep them while they are worked on, how to settle them); the consumer (consumer.ts) knows
 * Redpoint (decode, apply, hold through store trouble). A Kafka source is one such module:
 * `next` is a fetched batch of one partition, `settle` commits its offsets once every record
 * before them is final (a `retry` goes to a retry topic), `release` seeks back, `keepAlive`
 * pauses the partition so the group does not rebalance it away.
 */
export interface QueueSource {
  /** The `source` label of the metrics, and the logs' name for it: `outbox`, `jetstream`. */
  readonly name: string;
  /** Connects, and creates what is missing (table, stream, consumer). Throws when it cannot. */
  open(): Promise<void>;
  /**
   * The next batch of at most `max` records, in queue order; waits until there is one. Resolves
   * null once `signal` aborts. At most one batch is out at a time per source, so a slow store
   * slows the pulling down: nothing queues up in memory beyond one batch and the client's own
   * bounded prefetch.
   */
  next(max: number, signal: AbortSignal): Promise<DeliveryBatch | null>;
  /** Records not yet settled and the age of the oldest of them, in seconds (the gauges). */
  backlog(): Promise<{ waiting: number; oldestSeconds: number }>;
  /** Disconnects. Any batch not settled is released by the queue itself (its lock or ack wait). */
  close(): Promise<void>;
}

export interface Delivery {
  /** The queue's id of it (outbox row id, stream sequence), for logs and dead letters. */
  readonly id: string;
  /** Deliveries of it before this one that ended in a retry (0 the first time). */
  readonly attempts: number;
  /** The record as parsed JSON; throws `bad_json` when its bytes are not JSON. */
  body(): unknown;
}

export interface DeliveryBatch {
  readonly deliveries: readonly Delivery[];
  /** While the consumer holds the batch through store trouble: keep it from going to another process. Throws once the hold is lost. */
  keepAlive(): Promise<void>;
  /** One final outcome per delivery, in order: applied ones deleted or acked, dead ones moved to the dead letter, retries offered again later. */
  settle(outcomes: readonly Outcome[]): Promise<void>;
  /** Gives every record back untouched: only at shutdown, while holding them (a source may stop taking records first). */
  release(): Promise<void>;
}
