import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

type Labels<T extends string> = Partial<Record<T, string>>;

/**
 * Counts of a counter bumped on a hot path (every request, every push), kept as plain numbers per
 * label set and handed to the prom-client counter whenever it is read (a scrape, the workers'
 * aggregation, a test's get()), from its collect hook: what it reports is exact. prom-client's own
 * inc() builds a hash string of the label values and checks them on every call, which at tens of
 * thousands of pushes a second is measurable CPU and garbage. `key` names a label set; `labelsOf`
 * turns a key into the labels, once per key.
 */
class PendingCounts<T extends string> {
  private readonly sets = new Map<string, { labels: Labels<T>; n: number }>();

  constructor(private readonly labelsOf: (key: string) => Labels<T>) {}

  add(key: string, n = 1): void {
    const set = this.sets.get(key);
    if (set) set.n += n;
    else this.sets.set(key, { labels: this.labelsOf(key), n });
  }

  /** The collect hook of the counter these counts belong to. */
  flushTo(counter: Counter<T>): void {
    for (const set of this.sets.values()) {
      if (set.n === 0) continue;
      counter.inc(set.labels, set.n);
      set.n = 0;
    }
  }
}

/** The collect option of a counter fed by `pending`. */
function collecting<T extends string>(pending: PendingCounts<T>): { collect(this: Counter<T>): void } {
  return {
    collect() {
      pending.flushTo(this);
    },
  };
}

/** The collect option of a gauge that reads the sum of `sources` whenever it is read. */
function summing(sources: ReadonlySet<() => number>): { collect(this: Gauge): void } {
  return {
    collect() {
      let n = 0;
      for (const read of sources) n += read();
      this.set(n);
    },
  };
}

/**
 * What the durable tier's gauges read from their sources whenever the metrics are read (a scrape,
 * the workers' aggregation), rather than what a drain pass last saw: "backlog 0" must mean that
 * every acknowledged change is in PostgreSQL at that moment, and a stalled pass sees nothing.
 */
export interface DurableReadings {
  /** The marks waiting in Redis now, and the oldest one's time (ms since the epoch; null: none). */
  backlog(): Promise<{ marks: number; oldest: number | null }>;
  /** Whether PostgreSQL answers now. */
  database(): Promise<boolean>;
}

/**
 * How long a read of the metrics waits for Redis or PostgreSQL (below the workers' 2 s collect
 * bound): past it the backlog gauges read NaN (unknown, never a reassuring 0) and the database 0.
 */
export const SCRAPE_READ_MS = 1_000;

/** `work`'s value, or `fallback` when it fails or takes longer than `ms`: a scrape never waits on a source that does not answer. */
export async function readWithin<T>(work: () => Promise<T>, fallback: T, ms = SCRAPE_READ_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  try {
    return await Promise.race([work().catch(() => fallback), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The durable tier's gauges, read when scraped (Metrics.readDurable). */
const DURABLE_GAUGES = ['redpoint_persist_backlog', 'redpoint_persist_oldest_seconds', 'redpoint_database_up'] as const;

/** Key of an HTTP request's label set in `Metrics.httpRequestCounts`: status, a space, the route. */
export const httpRequestKey = (route: string, status: number): string => `${status} ${route}`;

/**
 * One registry per server instance (tests run several servers in one process). Names follow
 * Prometheus conventions: `_total` counters, `_seconds` histograms.
 */
export class Metrics {
  readonly registry = new Registry();
  /** The hot counters' pending counts (PendingCounts): add here, read through the counter. */
  readonly httpRequestCounts = new PendingCounts<'route' | 'status'>((key) => {
    const space = key.indexOf(' ');
    // In the order the counter declares them: the exposition prints labels in object order.
    return { route: key.slice(space + 1), status: key.slice(0, space) };
  });
  readonly apiKeyRequestCounts = new PendingCounts<'key'>((key) => ({ key }));
  readonly ingestMessageCounts = new PendingCounts<never>(() => ({}));
  readonly frameCounts = new PendingCounts<'type'>((type) => ({ type }));
  readonly httpRequests = new Counter({
    name: 'redpoint_http_requests_total',
    help: 'HTTP requests by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
    ...collecting(this.httpRequestCounts),
  });
  readonly httpDuration = new Histogram({
    name: 'redpoint_http_request_duration_seconds',
    help: 'HTTP request latency by route',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  /**
   * Requests in flight of each HTTP router (the API's; the ops port's, when it has one): the gauge
   * is their sum, read when the gauge is, rather than set twice per request.
   */
  readonly httpInFlightSources = new Set<() => number>();
  readonly httpInFlight = new Gauge({
    name: 'redpoint_http_requests_in_flight',
    help: 'HTTP requests received and not yet answered',
    registers: [this.registry],
    ...summing(this.httpInFlightSources),
  });
  readonly errors = new Counter({
    name: 'redpoint_errors_total',
    help: 'Errors answered, by error code',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  readonly apiKeyRequests = new Counter({
    name: 'redpoint_api_key_requests_total',
    help: 'Requests authenticated with an API key, by key name (shows when a rotated-out key is no longer used)',
    labelNames: ['key'] as const,
    registers: [this.registry],
    ...collecting(this.apiKeyRequestCounts),
  });
  readonly ingestMessages = new Counter({
    name: 'redpoint_ingest_messages_total',
    help: 'Messages applied',
    registers: [this.registry],
    ...collecting(this.ingestMessageCounts),
  });
  readonly groupCommitBatch = new Histogram({
    name: 'redpoint_group_commit_batch_messages',
    help: 'Messages merged into one flush to the store',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000],
    registers: [this.registry],
  });
  readonly groupCommitOps = new Histogram({
    name: 'redpoint_group_commit_user_ops',
    help: 'Per-user store operations in one flush',
    buckets: [1, 2, 5, 10, 50, 100, 500, 1000, 5000, 20000],
    registers: [this.registry],
  });
  readonly pulls = new Counter({
    name: 'redpoint_pulls_total',
    help: 'Pulls by kind (delta: continued the cursor; snapshot: started over)',
    labelNames: ['kind', 'transport'] as const,
    registers: [this.registry],
  });
  readonly connections = new Gauge({
    name: 'redpoint_ws_connections',
    help: 'Open WebSocket connections (authenticated or not)',
    registers: [this.registry],
  });
  readonly framesIn = new Counter({
    name: 'redpoint_ws_frames_in_total',
    help: 'Client frames received, by type',
    labelNames: ['type'] as const,
    registers: [this.registry],
  });
  readonly framesOut = new Counter({
    name: 'redpoint_ws_frames_out_total',
    help: 'Frames sent to clients, by type (a topic publish counts once)',
    labelNames: ['type'] as const,
    registers: [this.registry],
    ...collecting(this.frameCounts),
  });
  readonly fanout = new Histogram({
    name: 'redpoint_push_fanout_sockets',
    help: 'Local sockets one push reached',
    buckets: [0, 1, 2, 5, 10, 100, 1000, 10000],
    registers: [this.registry],
  });
  readonly notifyLatency = new Histogram({
    name: 'redpoint_notify_latency_seconds',
    help: 'Message arrival at ingest to push written to the sockets',
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly closes = new Counter({
    name: 'redpoint_ws_closes_total',
    help: 'Connections closed by the server, by reason',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly storeLatency = new Histogram({
    name: 'redpoint_store_op_seconds',
    help: 'Latency of store calls (Redis script round trips) by operation',
    labelNames: ['op'] as const,
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
    registers: [this.registry],
  });
  readonly streamLength = new Histogram({
    name: 'redpoint_pull_entries',
    help: 'Entries returned per pull page (how far behind clients are)',
    buckets: [0, 1, 2, 5, 10, 50, 100, 500, 1000],
    registers: [this.registry],
  });
  readonly seqJumps = new Counter({
    name: 'redpoint_seq_jumps_total',
    help: 'Message or head seqs further above their conversation head than MAX_SEQ_JUMP, by what they got',
    labelNames: ['action'] as const,
    registers: [this.registry],
  });
  readonly threadFollowsDropped = new Counter({
    name: 'redpoint_thread_follows_dropped_total',
    help: 'Implicit thread follows (the root sender, a replier, a mentioned member) dropped because the user follows LIMITS.threadsFollowedPerConversation threads of the conversation already',
    registers: [this.registry],
  });
  readonly readsCapped = new Counter({
    name: 'redpoint_reads_capped_total',
    help: 'Reads further above their conversation head than MAX_READ_AHEAD, applied as a read of head + MAX_READ_AHEAD',
    registers: [this.registry],
  });
  readonly readResets = new Counter({
    name: 'redpoint_read_resets_total',
    help: "Operator resets of a user's read position (reset-read), by whether they lowered it",
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly reconcileRuns = new Counter({
    name: 'redpoint_reconcile_runs_total',
    help: 'Completed walks of the periodic reconcile job',
    registers: [this.registry],
  });
  readonly reconcileChecked = new Counter({
    name: 'redpoint_reconcile_checked_total',
    help: 'Users and conversations the reconcile job checked',
    labelNames: ['subject'] as const,
    registers: [this.registry],
  });
  readonly reconcileFindings = new Counter({
    name: 'redpoint_reconcile_findings_total',
    help: 'Findings the reconcile job confirmed, by kind (should stay near zero)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly reconcileRepaired = new Counter({
    name: 'redpoint_reconcile_repaired_total',
    help: 'Findings the reconcile job repaired, by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly reconcileUnrepaired = new Counter({
    name: 'redpoint_reconcile_unrepaired_total',
    help: 'Findings still there after the reconcile job repaired them, by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly reconcileLastRun = new Gauge({
    name: 'redpoint_reconcile_last_run_timestamp_seconds',
    help: 'When the reconcile job last finished a walk (Unix seconds)',
    registers: [this.registry],
  });
  // With several workers (WORKERS) their metrics are summed, except these: ready and up only if
  // every worker is, and one build.
  readonly ready = new Gauge({
    name: 'redpoint_ready',
    help: '1 when the store is reachable and the server accepts traffic',
    registers: [this.registry],
    aggregator: 'min',
  });
  readonly storeUp = new Gauge({
    name: 'redpoint_store_up',
    help: '1 while a store connection target (engine, bus, each cluster master) is usable, 0 while it is down',
    labelNames: ['target'] as const,
    registers: [this.registry],
    aggregator: 'min',
  });
  readonly storeErrors = new Counter({
    name: 'redpoint_store_errors_total',
    help: 'Failed store calls by kind (not_ready, timeout, connection_lost, cluster_down...) and outcome (not_applied, unknown)',
    labelNames: ['kind', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly busErrors = new Counter({
    name: 'redpoint_bus_errors_total',
    help: 'Failed subscribes to the store notifications that cross processes, by operation (publishes run inside the store scripts: a failed one is a store error)',
    labelNames: ['op'] as const,
    registers: [this.registry],
  });
  readonly unavailableReplies = new Counter({
    name: 'redpoint_unavailable_replies_total',
    help: 'Requests and frames answered with a 503-class error (unavailable, outcome_unknown), by code and transport',
    labelNames: ['code', 'transport'] as const,
    registers: [this.registry],
  });
  // The durable tier (server/durable/), when DATABASE_URL is set: read from Redis and PostgreSQL
  // when the metrics are read, by the first worker only (readDurable).
  readonly persistBacklog = new Gauge({
    name: DURABLE_GAUGES[0],
    help: 'Changes acknowledged but not yet in PostgreSQL (dirty record and conversation marks in Redis), read when scraped; 0: every acknowledged change is in PostgreSQL; NaN: Redis did not answer within 1 s',
    registers: [this.registry],
    aggregator: 'max',
    collect: async () => {
      const backlog = await this.readBacklog();
      if (backlog !== undefined) this.persistBacklog.set(backlog === null ? Number.NaN : backlog.marks);
    },
  });
  readonly persistOldest = new Gauge({
    name: DURABLE_GAUGES[1],
    help: 'Age of the least recently changed record (or conversation mark) not yet in PostgreSQL, from its last change, read when scraped (0 when caught up; NaN: Redis did not answer within 1 s)',
    registers: [this.registry],
    aggregator: 'max',
    collect: async () => {
      const backlog = await this.readBacklog();
      if (backlog === undefined) return;
      if (backlog === null) this.persistOldest.set(Number.NaN);
      else this.persistOldest.set(backlog.oldest === null ? 0 : Math.max(0, (Date.now() - backlog.oldest) / 1000));
    },
  });
  readonly persistLag = new Histogram({
    name: 'redpoint_persist_lag_seconds',
    help: "From a record's last change before its drain (or a conversation's mark) to its mark being cleared after PostgreSQL committed it",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
    registers: [this.registry],
  });
  readonly persistRows = new Counter({
    name: 'redpoint_persist_rows_total',
    help: 'Rows written to PostgreSQL by the drainer, by kind (record, head, conversation)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly persistErrors = new Counter({
    name: 'redpoint_persist_errors_total',
    help: 'Drain passes that failed (PostgreSQL or Redis unavailable); the marks stay and are retried',
    registers: [this.registry],
  });
  readonly databaseUp = new Gauge({
    name: DURABLE_GAUGES[2],
    help: '1 when PostgreSQL answered the durable tier (SELECT 1 within 1 s) when scraped',
    registers: [this.registry],
    aggregator: 'min',
    collect: async () => {
      const durable = this.durable;
      if (durable) this.databaseUp.set((await readWithin(() => durable.database(), false)) ? 1 : 0);
    },
  });
  readonly restored = new Counter({
    name: 'redpoint_restored_total',
    help: 'Users and conversations put back into Redis from PostgreSQL (restore on touch), by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly coldEvicted = new Counter({
    name: 'redpoint_cold_evicted_total',
    help: 'Users removed from Redis as cold (idle past COLD_AFTER_SECONDS, all of their state in PostgreSQL), and conversations with them (no member left in Redis), by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly buildInfo = new Gauge({
    name: 'redpoint_build_info',
    help: 'Always 1; the labels say which build runs',
    labelNames: ['version', 'node'] as const,
    registers: [this.registry],
    aggregator: 'first',
  });

  /** What the durable tier's gauges read when the metrics are read (readDurable). */
  private durable: DurableReadings | undefined;
  /** The backlog read in progress: the two gauges it feeds are collected together and share it. */
  private backlogRead: Promise<{ marks: number; oldest: number | null } | null> | undefined;

  /**
   * Where the durable tier's gauges read from; undefined removes them. Without a durable tier
   * there is nothing to read (a `redpoint_database_up 0` would trip its alert), and a worker other
   * than the first leaves them to it: the workers' values are combined (max, min), so a second
   * reading only repeats the Redis look (on a cluster, every slot) and the `SELECT 1` per scrape.
   */
  readDurable(readings: DurableReadings | undefined): void {
    this.durable = readings;
    if (!readings) for (const name of DURABLE_GAUGES) this.registry.removeSingleMetric(name);
  }

  /** The backlog now (null: Redis did not answer in time; undefined: no durable tier). */
  private readBacklog(): Promise<{ marks: number; oldest: number | null } | null | undefined> {
    const durable = this.durable;
    if (!durable) return Promise.resolve(undefined);
    this.backlogRead ??= readWithin<{ marks: number; oldest: number | null } | null>(() => durable.backlog(), null).finally(() => {
      this.backlogRead = undefined;
    });
    return this.backlogRead;
  }

  /**
   * The Prometheus text of /metrics: this registry's, or, in a worker of several, every worker's
   * aggregated (server/workers/).
   */
  exposition: () => Promise<string> = () => this.registry.metrics();

  /** `processMetrics`: the Node process metrics (CPU, memory, event loop); one worker of several reports them. */
  constructor({ processMetrics = true }: { processMetrics?: boolean } = {}) {
    if (processMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'redpoint_' });
  }
}
