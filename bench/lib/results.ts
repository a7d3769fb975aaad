import type { LatencySummary } from './histogram.js';
import type { SectionReport } from './section.js';

export interface NotifyScenario {
  /** e.g. `1to1-1000`, `group1000-100`. */
  id: string;
  kind: '1to1' | 'group';
  /** WebSocket clients connected (each a distinct user). */
  clients: number;
  /** Members of the group (group scenarios; above the large-group threshold: read diffusion). */
  groupSize: number;
  /** Messages POSTed per second. */
  rate: number;
}

export interface NotifyResult {
  scenario: NotifyScenario;
  system: string;
  latency: LatencySummary;
  /** Measured messages acknowledged per second. */
  messagesPerSec: number;
  /** Measured (client, message) notifications delivered per second. */
  pushesPerSec: number;
  /** Measured messages sent × clients each should reach. */
  expected: number;
  delivered: number;
  postErrors: number;
  clientErrors: number;
  /** Worst lag of the load generator behind its schedule, ms. */
  maxLagMs: number;
  /** Event-loop stalls of the load generator while measuring: worst round's p99, and max, ms. */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** Redpoint only: mean messages per group-commit flush during the run. */
  meanCommitBatch: number | undefined;
}

export interface IngestResult {
  system: string;
  batch: number;
  connections: number;
  requestsPerSec: number;
  messagesPerSec: number;
  latency: LatencySummary;
  errors: number;
  non2xx: number;
  meanCommitBatch: number | undefined;
}

export interface BenchEnvironment {
  date: string;
  node: string;
  cpu: string;
  cores: number;
  commit: string;
  mode: string;
  /** 1-minute load average when the run started and when it ended (other work on the machine). */
  loadAverage: [number, number];
  settings: Record<string, string | number>;
}

export interface BenchResults {
  env: BenchEnvironment;
  notify: NotifyResult[];
  ingest: IngestResult[];
  /** The scenarios after the notify and ingest tables. */
  sections: SectionReport[];
  /** Scenarios that failed (a server crashed, a client could not connect...), with the reason. */
  failures: string[];
  /** Whole run, seconds. */
  wallSeconds: number;
}
