import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/** What a worker thread is started with (workerData). */
export interface WorkerStart {
  index: number;
  count: number;
  /** The port the supervisor chose (PORT, or a free one for PORT=0). */
  port: number;
  /** The worker module (source-worker.mjs imports it when running from source). */
  entry: string;
  /** A module exporting the entry point's extra routes (`registerRoutes`, see gateway/route-hook.ts). */
  routesModule?: string;
}

/** Supervisor → worker. */
export type ToWorker =
  /** Send your metrics (registry JSON) for an aggregate. */
  | { t: 'collect'; id: number }
  /** The aggregate asked for with `metrics?`. */
  | { t: 'metrics'; id: number; text: string }
  | { t: 'shutdown' };

/** Worker → supervisor. */
export type FromWorker =
  | { t: 'ready'; port: number }
  | { t: 'failed'; message: string }
  | { t: 'collected'; id: number; json: MetricObjectWithValues<MetricValue<string>>[] }
  /** Aggregate every worker's metrics and send them back (`metrics`). */
  | { t: 'metrics?'; id: number }
  | { t: 'closed'; code: number };
