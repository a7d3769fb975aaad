import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { RecordTarget } from './apply-records.js';
import { QueueConsumer } from './consumer.js';
import { JetStreamSource } from './jetstream-source.js';
import { OutboxSource } from './outbox-source.js';
import { QueueMetrics } from './queue-metrics.js';
import type { QueueSource } from './source.js';

/** Queue ingest settings (server/config.ts reads them from INGEST_*). */
export interface QueueConfig {
  outbox?: { url: string; table: string } | undefined;
  nats?: { url: string; stream: string; subject: string } | undefined;
  /** Records per batch. */
  batch: number;
  /** How long a record naming an unknown conversation is retried, in seconds. */
  retrySeconds: number;
  /** Outbox poll without a notification (tests shorten it). */
  outboxPollMs?: number;
}

export const DEFAULT_QUEUE_BATCH = 500;
export const DEFAULT_RETRY_SECONDS = 300;

export interface RunningQueues {
  readonly sources: readonly QueueSource[];
  readonly metrics: QueueMetrics;
  /** Stops pulling, settles or releases the batches in hand, disconnects. */
  close(): Promise<void>;
}

/**
 * Opens the configured sources (creating tables, streams and the consumer where missing) and
 * starts one consumer per source. Throws, with every source it opened closed again, when one
 * cannot be opened: a server told to consume a queue does not start without it.
 */
export async function startQueues(config: QueueConfig, target: RecordTarget, registry: Registry, log: Logger): Promise<RunningQueues | undefined> {
  const sources: QueueSource[] = [];
  if (config.outbox) sources.push(new OutboxSource({ ...config.outbox, ...(config.outboxPollMs ? { pollMs: config.outboxPollMs } : {}) }, log));
  if (config.nats) sources.push(new JetStreamSource({ ...config.nats, batch: config.batch }, log));
  if (sources.length === 0) return undefined;
  // The source whose open failed is closed too: it may hold what it opened before failing (the
  // outbox's pooled connection after a refused table, the NATS connection after a stream error).
  const tried: QueueSource[] = [];
  try {
    for (const source of sources) {
      tried.push(source);
      await source.open();
    }
  } catch (err) {
    await Promise.all(tried.map((s) => s.close().catch(() => undefined)));
    throw err;
  }
  const metrics = new QueueMetrics(registry);
  const consumers = sources.map((source) => {
    metrics.watch(source.name, () => source.backlog());
    return new QueueConsumer(source, target, metrics, log, { batch: config.batch, retryBudgetMs: config.retrySeconds * 1000 });
  });
  for (const c of consumers) c.start();
  log.info({ event: 'ingest_queues', sources: sources.map((s) => s.name) }, `consuming ${sources.map((s) => s.name).join(' and ')}`);
  let closing: Promise<void> | undefined;
  return {
    sources,
    metrics,
    close() {
      closing ??= (async () => {
        await Promise.all(consumers.map((c) => c.stop()));
        await Promise.all(sources.map((s) => s.close().catch(() => undefined)));
      })();
      return closing;
    },
  };
}
