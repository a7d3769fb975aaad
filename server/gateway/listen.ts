import { type TemplatedApp, type us_listen_socket, uws } from './uws.js';

/** The native listen(host, port, options, cb), which the typings lack. */
type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;

/** The native module's constant (the typings only have it as a type-level enum). */
const EXCLUSIVE_PORT = (uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;

/**
 * Listens on host:port EXCLUSIVELY. uWS's default is SO_REUSEPORT: a second server started on
 * the same port by mistake would start silently and the kernel would spread connections over
 * two processes with different in-memory state. Here a taken port is an error.
 */
export function listenExclusive(app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  return new Promise((resolve, reject) => {
    (app.listen as unknown as ListenWithOptions).call(app, host, port, EXCLUSIVE_PORT, (socket) => {
      if (socket) resolve(socket);
      else
        reject(
          new Error(
            `cannot listen on ${host}:${port}: the port is taken (another process listens there; Redpoint never shares a port) or the address is not available`,
          ),
        );
    });
  });
}

/**
 * Listens on host:port shared with the other worker threads of this process (SO_REUSEPORT; the
 * kernel spreads connections over them). Only for WORKERS: the supervisor holds the port's
 * guard, so no other Redpoint can join (server/workers/port-guard.ts).
 */
export function listenShared(app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`cannot listen on ${host}:${port} (shared by the workers): the address is not available`));
    });
  });
}
