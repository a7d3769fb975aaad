import { Agent, request } from 'node:http';

export interface HttpReply {
  status: number;
  body: string;
}

/** Keep-alive HTTP to one server on 127.0.0.1. Every request has a deadline. */
export class HttpTarget {
  private readonly agent: Agent;

  constructor(
    readonly port: number,
    private readonly headers: Readonly<Record<string, string>> = {},
    maxSockets = 64,
    private readonly timeoutMs = 10_000,
  ) {
    this.agent = new Agent({ keepAlive: true, maxSockets });
  }

  send(method: string, path: string, body?: unknown): Promise<HttpReply> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      let replyStarted = false;
      // Says where a request failed (for the bench's failure reasons): on a pooled socket or a new
      // one, before or after the reply's head arrived.
      const fail = (err: Error): void => reject(Object.assign(err, { reusedSocket: req.reusedSocket, replyStarted }));
      const req = request(
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
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
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
