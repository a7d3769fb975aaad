import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP port that forwards to the server under test and can be closed and opened again on the
 * same number at once. Needed because uWS binds without SO_REUSEADDR: after serving any
 * connection, a new uWS server cannot bind the same port until the old connections leave
 * TIME_WAIT (about 60 s on Linux). Node's listener sets SO_REUSEADDR, so clients here see the
 * "same port" go away (connection refused) and come back, while each uWS server takes a fresh one.
 */
export class FrontDoor {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(private readonly target: () => number) {}

  async open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.target(), '127.0.0.1');
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.setNoDelay(true);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address && typeof address === 'object') this.port = address.port;
    this.server = server;
  }

  /**
   * Stops listening and cuts every forwarded connection; resolves once they are closed, so a
   * client's pooled connection has seen its end before anything (a restart) comes next.
   */
  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    // A socket leaves the set when it closes: those in it are still open.
    const closed = [...this.sockets].map((s) => new Promise<void>((resolve) => s.once('close', () => resolve())));
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
    await Promise.all(closed);
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
