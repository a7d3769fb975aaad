import type { Server } from 'node:net';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { shutdownBoundMs } from '../app.js';
import type { Config } from '../config.js';
import { exitAtOnce, type StopSignals } from '../stop-signals.js';
import type { FromWorker, ToWorker, WorkerStart } from './messages.js';
import { claimPort, probePort } from './port-guard.js';

/** A worker that died is started again after this long (it serves nothing meanwhile; the others do). */
const RESPAWN_MS = 1_000;
/** A metrics aggregate waits this long for the workers' parts, then goes with what came. */
const COLLECT_MS = 2_000;

type Json = MetricObjectWithValues<MetricValue<string>>[];

interface Slot {
  index: number;
  worker: Worker;
  ready: boolean;
}

/**
 * WORKERS=N (Redis engines): N server threads in this process serve one port, each with its own
 * uWS app, event loop and store connections; pushes cross threads through the store's pub/sub as
 * they cross processes. This thread only supervises: it checks the port is free and holds its
 * guard (so no second Redpoint joins it by accident), starts the workers, starts again one that
 * dies, assembles /metrics from all of them, and on SIGTERM/SIGINT shuts them all down.
 */
export async function runWorkers(config: Config, log: Logger, count: number, signals: StopSignals, routesModule?: string): Promise<void> {
  let port: number;
  let guard: Server;
  try {
    port = await probePort(config.host, config.port);
    guard = await claimPort(config.host, port);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    log.fatal({ event: 'start_failed', err: reason }, `cannot start: ${reason}`);
    process.exit(1);
  }
  // From source (tsx), the worker goes through a loader of its own (source-worker.mjs).
  const fromSource = import.meta.url.endsWith('.ts');
  const entry = new URL(fromSource ? './worker.ts' : './worker.js', import.meta.url);
  const file = fromSource ? new URL('./source-worker.mjs', import.meta.url) : entry;
  const slots: Slot[] = [];
  let stopping = false;
  let collectId = 0;
  const collecting = new Map<number, { parts: Json[]; expected: number; done: (parts: Json[]) => void }>();

  const post = (slot: Slot, message: ToWorker): void => slot.worker.postMessage(message);

  /** Every ready worker's metrics, summed (gauges as declared: ready and store up are the minimum). */
  const aggregate = async (): Promise<string> => {
    const live = slots.filter((s) => s.ready);
    const id = ++collectId;
    const parts = await new Promise<Json[]>((resolve) => {
      const timer = setTimeout(() => {
        collecting.delete(id);
        resolve(entry.parts);
      }, COLLECT_MS);
      const entry = {
        parts: [] as Json[],
        expected: live.length,
        done: (all: Json[]) => {
          clearTimeout(timer);
          collecting.delete(id);
          resolve(all);
        },
      };
      collecting.set(id, entry);
      for (const s of live) post(s, { t: 'collect', id });
      if (live.length === 0) entry.done([]);
    });
    return AggregatorRegistry.aggregate(parts).metrics();
  };

  const spawn = (index: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const start: WorkerStart = { index, count, port, entry: entry.href, ...(routesModule ? { routesModule } : {}) };
      const worker = new Worker(file, { workerData: start });
      const slot: Slot = { index, worker, ready: false };
      slots[index] = slot;
      worker.on('message', (message: FromWorker) => {
        switch (message.t) {
          case 'ready':
            slot.ready = true;
            resolve();
            return;
          case 'failed':
            reject(new Error(message.message));
            return;
          case 'collected': {
            const entry = collecting.get(message.id);
            if (!entry) return;
            entry.parts.push(message.json);
            if (entry.parts.length >= entry.expected) entry.done(entry.parts);
            return;
          }
          case 'metrics?':
            void aggregate().then((text) => post(slot, { t: 'metrics', id: message.id, text }));
            return;
          case 'closed':
            return;
        }
      });
      worker.on('error', (err) => log.error({ event: 'worker_error', worker: index, err }, `worker ${index} failed: ${err.message}`));
      worker.on('exit', (code) => {
        slot.ready = false;
        if (stopping) return;
        reject(new Error(`worker ${index} exited (${code}) while starting`));
        log.error({ event: 'worker_exit', worker: index, code }, `worker ${index} exited (${code}); starting it again in ${RESPAWN_MS} ms`);
        setTimeout(() => {
          if (!stopping)
            spawn(index).catch((err: unknown) => log.error({ event: 'worker_exit', worker: index, err: String(err) }, `worker ${index} did not start again`));
        }, RESPAWN_MS).unref();
      });
    });

  /**
   * Every worker closes its server (one still starting closes it once started), then the threads
   * end: ending a thread whose uWS app still listens aborts the process. The exit codes of their closes.
   */
  const closeWorkers = async (): Promise<number[]> => {
    const codes = await Promise.all(
      slots.map(
        (s) =>
          new Promise<number>((resolve) => {
            if (!s) return resolve(0);
            s.worker.on('message', (m: FromWorker) => {
              if (m.t === 'closed') resolve(m.code);
            });
            s.worker.once('exit', () => resolve(0));
            post(s, { t: 'shutdown' });
          }),
      ),
    );
    await Promise.all(slots.map((s) => s?.worker.terminate()));
    guard.close();
    return codes;
  };
  /** After this long, a shutdown that has not finished is abandoned: exit 1. */
  const exitIfStuck = (): void => {
    const bound = shutdownBoundMs(config.storeTimeoutMs);
    const force = setTimeout(() => {
      log.error({ event: 'shutdown_forced', boundMs: bound }, `shutdown took longer than ${bound} ms; exiting`);
      process.exit(1);
    }, bound);
    force.unref();
  };

  try {
    await Promise.all(Array.from({ length: count }, (_, i) => spawn(i)));
  } catch (err) {
    stopping = true;
    const reason = err instanceof Error ? err.message : String(err);
    log.fatal({ event: 'start_failed', err: reason }, `cannot start: ${reason}`);
    exitIfStuck();
    await closeWorkers();
    process.exit(1);
  }
  log.info(
    { event: 'listening', host: config.host, port, opsPort: config.opsPort, workers: count },
    `listening on http://${config.host}:${port} with ${count} workers${config.opsPort !== undefined ? ` (operations on port ${config.opsPort})` : ''}`,
  );

  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    const started = Date.now();
    log.info({ event: 'shutdown', signal, workers: count }, 'shutting down every worker: refusing new work, answering requests in flight, draining writes');
    exitIfStuck();
    const codes = await closeWorkers();
    log.info({ event: 'shutdown_done', ms: Date.now() - started }, 'bye');
    process.exit(codes.every((c) => c === 0) ? 0 : 1);
  };
  signals.handle((signal) => void stop(signal), exitAtOnce(log, { workers: count }));
}
