import { createServer, type Server } from 'node:net';

/**
 * The port of a Redpoint serving with several worker threads is shared (SO_REUSEPORT) by them, so
 * that the kernel spreads connections; an exclusive bind cannot tell a second Redpoint to keep
 * out any more. This guard does: an abstract Unix socket named after the address, held by the
 * supervisor for its lifetime (released by the kernel when the process dies). A second Redpoint
 * on the same host:port finds it taken and refuses to start.
 */
export function claimPort(host: string, port: number): Promise<Server> {
  const name = `\0redpoint:${host}:${port}`;
  return new Promise((resolve, reject) => {
    const guard = createServer();
    guard.once('error', (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(`cannot listen on ${host}:${port}: another Redpoint serves it (Redpoint never shares a port with another instance)`)
          : err,
      );
    });
    guard.listen({ path: name, exclusive: true }, () => resolve(guard));
  });
}

/**
 * Checks that nothing else listens on host:port by binding it exclusively for a moment, and
 * returns the port (a free one for 0). The workers then bind it shared.
 */
export function probePort(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          `cannot listen on ${host}:${port}: ${err.code === 'EADDRINUSE' ? 'the port is taken (another process listens there; Redpoint never shares a port)' : err.message}`,
        ),
      ),
    );
    probe.listen({ host, port, exclusive: true }, () => {
      const address = probe.address();
      const chosen = typeof address === 'object' && address ? address.port : port;
      probe.close(() => resolve(chosen));
    });
  });
}
