import { pino } from 'pino';
import { type RunningServer, startServer } from '../../server/app.js';
import { Authenticator } from '../../server/auth/tokens.js';
import { type Config, loadConfig } from '../../server/config.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from './test-server.js';
import { WsClient } from './ws-client.js';

/** One structured log line, as pino writes it. */
export type LogLine = Record<string, unknown> & { level: number; msg: string; event?: string };

export interface TimedResponse {
  status: number;
  ms: number;
  retryAfter: string | null;
  connection: string | null;
  body: { error?: { code: string; message: string } } & Record<string, unknown>;
}

/**
 * A Redpoint server started as main.ts starts it (startServer builds the engine, the bus and the
 * store health from the environment), in this process, with its log lines captured: for the
 * tests of how the server behaves when the store or the process is in trouble.
 */
export interface LoggedServer {
  readonly server: RunningServer;
  readonly config: Config;
  readonly url: string;
  readonly wsUrl: string;
  readonly lines: LogLine[];
  /** A request with the API key (or `uid`'s JWT), timed. */
  call(method: string, path: string, body?: unknown, as?: { user: string }): Promise<TimedResponse>;
  client(uid: string): Promise<WsClient>;
  /** Resolves with the first log line (from `since`) that matches; rejects after `timeoutMs`. */
  waitLog(match: (line: LogLine) => boolean, timeoutMs?: number, since?: number): Promise<LogLine>;
  metrics(): Promise<string>;
  close(): Promise<void>;
}

export async function startLoggedServer(env: Record<string, string>): Promise<LoggedServer> {
  const lines: LogLine[] = [];
  const waiters = new Set<() => void>();
  const log = pino(
    { level: 'debug' },
    {
      write(chunk: string) {
        lines.push(JSON.parse(chunk) as LogLine);
        for (const wake of [...waiters]) wake();
      },
    },
  );
  const config = loadConfig({ REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWT_SECRET: TEST_JWT_SECRET, HOST: '127.0.0.1', PORT: '0', ...env });
  const server = await startServer(config, log);
  const url = `http://127.0.0.1:${server.port}`;
  const wsUrl = `ws://127.0.0.1:${server.port}/v1/ws`;
  const auth = Authenticator.fromConfig(config);
  const clients = new Set<WsClient>();

  const call = async (method: string, path: string, body?: unknown, as?: { user: string }): Promise<TimedResponse> => {
    const headers: Record<string, string> = { authorization: `Bearer ${as ? await auth.mintUserToken(as.user) : config.apiKey}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const started = performance.now();
    const res = await fetch(url + path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await res.text();
    const ms = performance.now() - started;
    let parsed: TimedResponse['body'] = {};
    try {
      parsed = JSON.parse(text) as TimedResponse['body'];
    } catch {
      // not JSON: leave the body empty
    }
    return { status: res.status, ms, retryAfter: res.headers.get('retry-after'), connection: res.headers.get('connection'), body: parsed };
  };

  const waitLog = (match: (line: LogLine) => boolean, timeoutMs = 10_000, since = 0): Promise<LogLine> =>
    new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = lines.slice(since).find(match);
        if (!found) return false;
        cleanup();
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(
          new Error(
            `no such log line within ${timeoutMs} ms; lines: ${lines
              .slice(since)
              .map((l) => l.event ?? l.msg)
              .join(' | ')}`,
          ),
        );
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        waiters.delete(wake);
      };
      const wake = (): void => void check();
      waiters.add(wake);
      check();
    });

  return {
    server,
    config,
    url,
    wsUrl,
    lines,
    call,
    async client(uid) {
      const client = await WsClient.open(wsUrl, { token: await auth.mintUserToken(uid) });
      clients.add(client);
      await client.ready();
      return client;
    },
    waitLog,
    metrics: async () => (await fetch(`${url}/metrics`)).text(),
    async close() {
      await Promise.all([...clients].map((c) => c.close()));
      await server.close();
    },
  };
}

/** One sample of a Prometheus text exposition (undefined when absent). */
export function metricSample(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}
