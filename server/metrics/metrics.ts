import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * One registry per server instance (tests run several servers in one process). Names follow
 * Prometheus conventions: `_total` counters, `_seconds` histograms.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'redpoint_http_requests_total',
    help: 'HTTP requests by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'redpoint_http_request_duration_seconds',
    help: 'HTTP request latency by route',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly errors = new Counter({
    name: 'redpoint_errors_total',
    help: 'Errors answered, by error code',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  readonly ingestMessages = new Counter({
    name: 'redpoint_ingest_messages_total',
    help: 'Messages applied',
    registers: [this.registry],
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
  readonly ready = new Gauge({
    name: 'redpoint_ready',
    help: '1 when the store is reachable and the server accepts traffic',
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'redpoint_' });
  }
}
