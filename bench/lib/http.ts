import { Agent, type ClientRequest, request } from 'node:http';

export interface HttpReply {
  status: number;
  body: string;
  /** The Retry-After header, when the reply had one. */
  retryAfter?: string;
}

/**
 * How long a pooled connection may sit idle before this client closes it (the Agent's `timeout`,
 * which Node applies to free sockets). The server closes idle HTTP connections itself:
 * uWebSockets.js arms `HTTP_IDLE_TIMEOUT_S = 10` (a compile-time constant in uWebSockets
 * src/HttpContext.h) through uSockets' `us_socket_timeout()`, which counts in ticks of
 * `LIBUS_TIMEOUT_GRANULARITY` = 4 s (uSockets src/libusockets.h) rounded up, so a connection is
 * closed 8 to 12 s after its last request. A request this client writes into a connection at the
 * moment the server closes it is reset with no reply: the soak saw ECONNRESET on sockets idle
 * 8.9 s, pulled from the bottom of the agent's LIFO pool in a burst. Closing ours after 4 s leaves
 * the server none to close. (Node's own `http.globalAgent` uses 5 s; `new Agent({ keepAlive })`
 * alone never closes them.)
 */
export const FREE_SOCKET_TIMEOUT_MS = 4_000;

/** Errors of a reused connection that the server had closed (or was closing) as the request went out. */
const STALE_CONNECTION_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/** Keep-alive HTTP to one server on 127.0.0.1. Every request has a deadline. */
export class HttpTarget {
  private readonly agent: Agent;
  private resentCount = 0;

  constructor(
    readonly port: number,
    private readonly headers: Readonly<Record<string, string>> = {},
    maxSockets = 64,
    private readonly timeoutMs = 10_000,
  ) {
    this.agent = new Agent({ keepAlive: true, maxSockets, timeout: FREE_SOCKET_TIMEOUT_MS });
  }

  /**
   * Requests sent a second time because their reused connection failed before any byte of the
   * reply came (HTTP/1.1 keep-alive's race with the server's idle close, which
   * FREE_SOCKET_TIMEOUT_MS should leave no room for; a report shows this count).
   */
  get resent(): number {
    return this.resentCount;
  }

  /**
   * One request. If it went out on a reused connection and failed with a connection error before
   * the reply's head came, the server was almost certainly closing that idle connection and never
   * read it: it is sent once more (the agent picks another connection or opens one). Every
   * Redpoint request is safe to repeat (protocol/PROTOCOL.md, "Retries"); timeouts, and failures
   * on a new connection or after the reply began, are not retried.
   */
  async send(method: string, path: string, body?: unknown): Promise<HttpReply> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    try {
      return await this.once(method, path, payload);
    } catch (err) {
      const e = err as { code?: unknown; reusedSocket?: unknown; replyStarted?: unknown };
      if (e.reusedSocket !== true || e.replyStarted !== false || !STALE_CONNECTION_CODES.has(String(e.code))) throw err;
      this.resentCount += 1;
      return await this.once(method, path, payload);
    }
  }

  private once(method: string, path: string, payload: string | undefined): Promise<HttpReply> {
    return new Promise((resolve, reject) => {
      let replyStarted = false;
      // Says where a request failed (for retrying, and for the bench's failure reasons): on a
      // pooled connection or a new one, before or after the reply's head arrived.
      const fail = (err: Error): void => reject(Object.assign(err, { reusedSocket: req.reusedSocket, replyStarted }));
      const req: ClientRequest = request(
        {
          host: '127.0.0.1',
          port: this.port,
          method,
          path,
          agent: this.agent,
          headers: {
            ...this.headers,
            ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
          },
          timeout: this.timeoutMs,
        },
        (res) => {
          replyStarted = true;
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          const retryAfter = res.headers['retry-after'];
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), ...(retryAfter !== undefined ? { retryAfter } : {}) }),
          );
          res.on('error', fail);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no reply within ${this.timeoutMs} ms`)));
      req.on('error', fail);
      req.end(payload);
    });
  }

  /** Like `send`, but a non-2xx status is an error (setup calls must not fail silently). */
  async expectOk(method: string, path: string, body?: unknown): Promise<string> {
    const reply = await this.send(method, path, body);
    if (reply.status < 200 || reply.status >= 300) {
      throw new Error(`${method} ${path} → ${reply.status}: ${reply.body.slice(0, 300)}`);
    }
    return reply.body;
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Runs `task` over `items` with at most `concurrency` in flight; the first failure rejects. */
export async function eachLimited<T>(items: readonly T[], concurrency: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      await task(items[i] as T, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}
