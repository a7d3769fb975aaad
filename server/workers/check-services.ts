import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { DurableTier } from '../durable/durable-tier.js';
import { OutboxSource } from '../queue/outbox-source.js';

/**
 * The start-up checks that depend on a PostgreSQL outside (the durable tier's schema, the outbox's
 * tables and their shape), decided once before any worker starts: a failure then leaves nothing
 * listening and is said once, not by each worker. The workers open both again and find nothing
 * left to do. Redis is left to the workers: its check is the engine's own start.
 */
export async function checkServices(config: Config, log: Logger): Promise<void> {
  // Warnings and failures only: the workers log the tier's readiness themselves.
  const quiet = log.child({}, { level: 'warn' });
  if (config.durable) await (await DurableTier.open(config.durable, quiet)).close();
  const outbox = config.queue?.outbox;
  if (outbox) {
    const source = new OutboxSource(outbox, quiet);
    try {
      await source.open();
    } finally {
      await source.close();
    }
  }
}
