import type { Logger } from 'pino';
import type { Engine } from '../engine/engine.js';
import { HttpRouter, type RouterOptions } from '../gateway/http.js';
import { listenExclusive } from '../gateway/listen.js';
import { registerOpsRoutes } from '../gateway/ops-routes.js';
import { closeApp, type us_listen_socket, uws } from '../gateway/uws.js';
import type { Metrics } from '../metrics/metrics.js';

export interface OpsListener {
  readonly port: number;
  readonly router: HttpRouter;
  /** Stops listening; open connections stay until `close()`. */
  stopListening(): void;
  close(): void;
}

/**
 * `/metrics`, `/healthz` and `/readyz` on their own port (OPS_PORT), so they can stay private
 * (a firewall or a Kubernetes port that is not exposed) without proxy rules on the public port.
 * Bound like the main port: exclusively.
 */
export async function startOpsListener(
  host: string,
  port: number,
  deps: { engine: Engine; metrics: Metrics; log: Logger; router: RouterOptions; database?: (() => Promise<boolean>) | undefined },
): Promise<OpsListener> {
  const app = uws.App();
  const router = new HttpRouter(app, deps.metrics, deps.log, deps.router);
  router.fallback(registerOpsRoutes(router, { engine: deps.engine, metrics: deps.metrics, database: deps.database }));
  let socket: us_listen_socket;
  try {
    socket = await listenExclusive(app, host, port);
  } catch (err) {
    closeApp(app);
    throw new Error(`OPS_PORT: ${err instanceof Error ? err.message : String(err)}`);
  }
  let listening = true;
  const stopListening = (): void => {
    if (listening) uws.us_listen_socket_close(socket);
    listening = false;
  };
  return {
    port: uws.us_socket_local_port(socket),
    router,
    stopListening,
    close: () => {
      stopListening();
      closeApp(app);
    },
  };
}
