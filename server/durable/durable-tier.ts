import type { Logger } from 'pino';
import type { DurableConfig } from '../config.js';
import type { DurableStore } from '../engine/durable-backing.js';
import { type DurableReadings, type Metrics, SCRAPE_READ_MS } from '../metrics/metrics.js';
import { addressOfUrl, postgresFailure } from '../start-failure.js';
import { ColdSweep } from './cold-sweep.js';
import { Persister } from './persister.js';
import { PgStore } from './pg-store.js';
import { migrate } from './schema.js';

/** How often (ms) a user's activity reaches the cold sweep's set at most: a fraction of the idle time, so a user seen at all is never close to cold. */
function activityEveryMs(coldAfterSeconds: number): number {
  if (coldAfterSeconds === 0) return 60_000;
  return Math.max(1, Math.min(60_000, Math.floor((coldAfterSeconds * 1000) / 8)));
}

/**
 * PostgreSQL behind Redis (DATABASE_URL; DESIGN.md §10, docs/durable.md): the schema migrated at
 * start, the backing the engine restores from, the write-behind drainer and the cold sweep.
 * The drainer and the sweep start once the engine is up (`run`).
 */
export class DurableTier {
  private persister: Persister | undefined;
  private sweep: ColdSweep | undefined;

  /**
   * One connection of its own for the health check: the drainer's pool may be all taken by
   * statements waiting on a lock, and PostgreSQL answering is what the check asks.
   */
  private readonly probe: PgStore;

  private constructor(
    readonly pg: PgStore,
    private readonly config: DurableConfig,
  ) {
    this.probe = PgStore.connect(config.databaseUrl, { max: 1, statementTimeoutMs: SCRAPE_READ_MS });
  }

  /** Connects and migrates; fails when PostgreSQL does not answer or its schema is newer than this build. */
  static async open(config: DurableConfig, log: Logger): Promise<DurableTier> {
    const pg = PgStore.connect(config.databaseUrl);
    try {
      const before = await migrate(pg.pool);
      log.info({ event: 'database_ready', schemaBefore: before }, 'durable tier: PostgreSQL schema ready');
      return new DurableTier(pg, config);
    } catch (err) {
      await pg.close().catch(() => undefined);
      throw postgresFailure({ variable: 'DATABASE_URL', address: addressOfUrl(config.databaseUrl, 5432) }, err, "the durable tier's schema");
    }
  }

  get activityEveryMs(): number {
    return activityEveryMs(this.config.coldAfterSeconds);
  }

  /**
   * Before serving: a store the tier begins over with an empty PostgreSQL is marked intact (a
   * miss there is a new user while PostgreSQL is down); a store that lacks marks over a database
   * that has rows lost data (a flush, an empty replacement, a failover), and misses are restored
   * from PostgreSQL — and refused while it is down — until `redpoint restore` marks it whole.
   */
  async prepare(store: DurableStore, log: Logger): Promise<void> {
    const empty = await this.pg.isEmpty();
    const missing = await store.markIntact(empty);
    if (missing > 0 && !empty) {
      log.warn(
        { event: 'store_not_intact', shards: missing },
        'durable tier: Redis lacks its intact mark while PostgreSQL holds state (Redis lost data): users and conversations are restored from PostgreSQL on first touch; run `redpoint restore` to warm them all',
      );
    }
  }

  run(store: DurableStore, log: Logger, metrics: Metrics): { persister: Persister; sweep: ColdSweep | undefined } {
    this.persister = new Persister(
      store,
      this.pg,
      { intervalMs: this.config.persistIntervalMs, batch: this.config.persistBatch, backlogWarn: this.config.backlogWarn },
      log,
      metrics,
    );
    this.persister.start();
    if (this.config.coldAfterSeconds > 0) {
      this.sweep = new ColdSweep(store, this.pg, { coldAfterSeconds: this.config.coldAfterSeconds, sweepSeconds: this.config.coldSweepSeconds }, log, metrics);
      this.sweep.start();
    }
    return { persister: this.persister, sweep: this.sweep };
  }

  /** What the tier's gauges read when scraped, in any process (worker) over `store`, whether it drains or not. */
  readings(store: DurableStore): DurableReadings {
    return {
      backlog: async () => store.backlog(await store.busyShards(0, store.shardCount)),
      database: () => this.databaseReady(),
    };
  }

  /** For /readyz and the gauge: PostgreSQL answers (reported, never failing readiness: Redis keeps serving without it). */
  async databaseReady(): Promise<boolean> {
    try {
      await this.probe.ping();
      return true;
    } catch {
      return false;
    }
  }

  /** Stops the drainer and the sweep after their passes in flight, then closes the pool. */
  async close(): Promise<void> {
    await Promise.all([this.persister?.stop(), this.sweep?.stop()]);
    await Promise.all([this.pg.close().catch(() => undefined), this.probe.close().catch(() => undefined)]);
  }
}
