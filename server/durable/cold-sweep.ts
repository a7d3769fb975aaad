import type { Logger } from 'pino';
import type { DurableStore } from '../engine/durable-backing.js';
import type { Metrics } from '../metrics/metrics.js';

/** Users looked at per shard per pass: a pass stays short, and a backlog of cold users goes over several passes. */
const PER_PASS = 500;

/**
 * Removes from Redis the users idle for `coldAfterSeconds` whose state PostgreSQL holds
 * (DESIGN.md §10), so Redis memory grows with active users, not registered ones. The check and
 * the removal are one atomic step per user (cold_evict.lua): a change landing first keeps the
 * user (its mark is not yet drained), and a touch landing after finds the user gone and restores
 * it from PostgreSQL. Any process may run it; two at once evict each user once.
 */
export class ColdSweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly store: DurableStore,
    private readonly options: { coldAfterSeconds: number; sweepSeconds: number },
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {}

  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One pass over every shard; returns how many users it evicted. */
  async sweepOnce(now = Date.now()): Promise<number> {
    const before = now - this.options.coldAfterSeconds * 1000;
    let evicted = 0;
    for (const shard of await this.store.busyShards(0, this.store.shardCount)) {
      const cold = await this.store.coldUsers(shard, before, PER_PASS);
      for (const uid of cold) if ((await this.store.evict(uid, before)) === 1) evicted++;
    }
    if (evicted > 0) this.metrics.coldEvicted.inc(evicted);
    return evicted;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.sweepOnce()
        .then(
          (n) => {
            if (n > 0) this.log.debug({ event: 'cold_sweep', evicted: n }, `cold sweep: ${n} users left Redis`);
          },
          (err: unknown) =>
            this.log.warn({ event: 'cold_sweep_failed', err: err instanceof Error ? err.message : String(err) }, 'cold sweep failed; it runs again'),
        )
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, this.options.sweepSeconds * 1000);
    this.timer.unref();
  }
}
