import { Counter, Gauge, type Registry } from 'prom-client';
import { readWithin } from '../metrics/metrics.js';

/** Bound on reading a backlog for a scrape: a scrape never waits on a queue that does not answer. */
const BACKLOG_TIMEOUT_MS = 2_000;

export type RetryCause = 'store' | 'unknown_conversation' | 'error';

/** The queue ingest's metrics, registered on the server's registry (PROTOCOL.md "Queue records" lists them). */
export class QueueMetrics {
  readonly records: Counter<'source' | 'outcome'>;
  readonly deadLetters: Counter<'source'>;
  readonly retries: Counter<'source' | 'cause'>;
  private readonly backlogs = new Map<string, () => Promise<{ waiting: number; oldestSeconds: number }>>();

  constructor(registry: Registry) {
    this.records = new Counter({
      name: 'redpoint_ingest_records_total',
      help: 'Queue records settled, by source and outcome (applied, dead, retry); the rate of applied is records consumed per second',
      labelNames: ['source', 'outcome'] as const,
      registers: [registry],
    });
    this.deadLetters = new Counter({
      name: 'redpoint_ingest_dead_letters_total',
      help: 'Queue records moved to the dead letter (malformed, invalid, or out of retries), by source',
      labelNames: ['source'] as const,
      registers: [registry],
    });
    this.retries = new Counter({
      name: 'redpoint_ingest_retries_total',
      help: 'Queue records tried again, by source and cause (store: held while the store did not answer; unknown_conversation; error)',
      labelNames: ['source', 'cause'] as const,
      registers: [registry],
    });
    const backlogs = this.backlogs;
    let last: Promise<Map<string, { waiting: number; oldestSeconds: number }>> | undefined;
    // Both gauges read one backlog call per source per scrape.
    const read = (): Promise<Map<string, { waiting: number; oldestSeconds: number }>> => {
      last ??= (async () => {
        const out = new Map<string, { waiting: number; oldestSeconds: number }>();
        await Promise.all(
          [...backlogs].map(async ([source, backlog]) => {
            const value = await readWithin(backlog, undefined, BACKLOG_TIMEOUT_MS);
            if (value) out.set(source, value);
          }),
        );
        setImmediate(() => (last = undefined));
        return out;
      })();
      return last;
    };
    new Gauge({
      name: 'redpoint_ingest_waiting_records',
      help: 'Queue records not yet settled, by source (absent while the queue does not answer)',
      labelNames: ['source'] as const,
      registers: [registry],
      async collect() {
        this.reset();
        for (const [source, b] of await read()) this.set({ source }, b.waiting);
      },
    });
    new Gauge({
      name: 'redpoint_ingest_oldest_record_age_seconds',
      help: 'Age of the oldest queue record not yet settled, by source (0 when none waits)',
      labelNames: ['source'] as const,
      registers: [registry],
      async collect() {
        this.reset();
        for (const [source, b] of await read()) this.set({ source }, b.oldestSeconds);
      },
    });
  }

  watch(source: string, backlog: () => Promise<{ waiting: number; oldestSeconds: number }>): void {
    this.backlogs.set(source, backlog);
  }
}
