import { parentPort, workerData } from 'node:worker_threads';
import { type RunningServer, startServer } from '../app.js';
import { loadConfig } from '../config.js';
import { loadRouteHook } from '../gateway/route-hook.js';
import { createLogger } from '../logger.js';
import type { FromWorker, ToWorker, WorkerStart } from './messages.js';

/**
 * One server thread of several (WORKERS): the whole server, on the port the supervisor chose,
 * shared with the other threads. Its /metrics are the aggregate of every worker's, which the
 * supervisor assembles on request.
 */
const port = parentPort;
if (!port) throw new Error('server/workers/worker.ts runs as a worker thread of server/workers/supervisor.ts');
const start = workerData as WorkerStart;
const send = (message: FromWorker): void => port.postMessage(message);

const config = { ...loadConfig(), port: start.port };
const log = createLogger(config.logLevel).child({ worker: start.index });

let nextId = 0;
const waiting = new Map<number, (text: string) => void>();
let server: RunningServer | undefined;

/** The server, or undefined when it failed to start (the supervisor heard why). */
const starting = (async (): Promise<RunningServer | undefined> => {
  try {
    const routes = start.routesModule ? await loadRouteHook(start.routesModule) : undefined;
    server = await startServer(
      config,
      log,
      undefined,
      {
        index: start.index,
        count: start.count,
        exposition: () =>
          new Promise<string>((resolve) => {
            const id = ++nextId;
            waiting.set(id, resolve);
            send({ t: 'metrics?', id });
          }),
      },
      routes,
    );
    send({ t: 'ready', port: server.port });
    return server;
  } catch (err) {
    send({ t: 'failed', message: err instanceof Error ? err.message : String(err) });
    return undefined;
  }
})();

port.on('message', (message: ToWorker) => {
  switch (message.t) {
    case 'collect':
      void (server ? server.metrics.registry.getMetricsAsJSON() : Promise.resolve([])).then((json) => send({ t: 'collected', id: message.id, json }));
      return;
    case 'metrics':
      waiting.get(message.id)?.(message.text);
      waiting.delete(message.id);
      return;
    case 'shutdown':
      // A shutdown that comes while the server is still starting (another worker failed to
      // start) waits for it and closes it: a thread ended with its port still listening aborts
      // the whole process (uv_loop_close() while having open handles).
      void starting
        .then((s) => s?.close())
        .then(
          () => send({ t: 'closed', code: 0 }),
          () => send({ t: 'closed', code: 1 }),
        );
      return;
  }
});
