import WebSocket from 'ws';
import { startServer, type RunningServer } from '../../server/app.js';
import { Authenticator } from '../../server/auth/tokens.js';
import type { Config, WsOptions } from '../../server/config.js';
import type { Engine } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import type { UnreadSummary } from '../../protocol/types.js';
import { silentLogger } from '../helpers/test-server.js';
import { FrontDoor } from './front-door.js';
import type { RedpointState } from '../../client-demo/sdk/index.js';

/**
 * A real Redpoint server in this process for SDK tests. Unlike test/helpers/test-server.ts it can
 * be stopped and started again on the same port over the same engine (a server restart that
 * keeps the state, as with Redis), and it takes WebSocket options (version frame period...).
 * Clients reach it through a FrontDoor (see there for why).
 */
export const API_KEY = 'sdk-test-api-key-0123456789';
export const JWT_SECRET = 'sdk-test-jwt-secret-0123456789abcdef-0123';

export interface HarnessOptions {
  ws?: Partial<WsOptions>;
  largeGroupThreshold?: number;
  snapshotEvery?: number;
  streamMaxLen?: number;
}

export class Harness {
  readonly auth: Authenticator;
  server: RunningServer | null = null;
  private readonly door = new FrontDoor(() => this.server?.port ?? 0);
  private constructor(
    private readonly config: Config,
    /** The engine outlives each server: `close()` of a server leaves it open. */
    private readonly engine: Engine,
  ) {
    this.auth = new Authenticator(config.jwtSecret, config.apiKey);
  }

  get port(): number {
    return this.door.port;
  }

  /** `overrides` replace fields of the server config (e.g. dev mode with the dev credentials). */
  static async start(options: HarnessOptions = {}, overrides: Partial<Config> = {}): Promise<Harness> {
    const config: Config = {
      port: 0,
      host: '127.0.0.1',
      redisUrl: undefined,
      apiKey: API_KEY,
      jwtSecret: JWT_SECRET,
      devMode: false,
      largeGroupThreshold: options.largeGroupThreshold ?? 500,
      snapshotEvery: options.snapshotEvery ?? 5,
      streamMaxLen: options.streamMaxLen ?? 10,
      logLevel: 'silent',
      ws: options.ws ?? {},
      ...overrides,
    };
    const memory = new MemoryEngine({ snapshotEvery: config.snapshotEvery, streamMaxLen: config.streamMaxLen });
    const keepOpen = new Proxy(memory, {
      get: (target, prop, receiver) => (prop === 'close' ? async () => undefined : Reflect.get(target, prop, receiver)),
    });
    const harness = new Harness(config, keepOpen);
    await harness.up();
    return harness;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get wsUrl(): string {
    return `ws://127.0.0.1:${this.port}/v1/ws`;
  }

  /** Starts the server (again), reachable on the port it had before if it had one. */
  async up(): Promise<void> {
    this.server = await startServer({ ...this.config, port: 0 }, silentLogger, this.engine);
    await this.door.open();
  }

  /** Stops the server (clients get 1001 going_away), then the port refuses connections; the state stays in the engine. */
  async down(): Promise<void> {
    await this.server?.close();
    this.server = null;
    await this.door.close();
  }

  token(uid: string, ttlSeconds = 3600): Promise<string> {
    return this.auth.mintUserToken(uid, ttlSeconds);
  }

  async api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(this.url + path, {
      method,
      headers: { authorization: `Bearer ${this.config.apiKey}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  conversation(conv: string, members: string[], category?: string): Promise<unknown> {
    return this.api('PUT', `/v1/conversations/${conv}/members`, { add: members, ...(category ? { category } : {}) });
  }

  message(conv: string, seq: number, sender: string, mentions?: string[]): Promise<unknown> {
    return this.api('POST', '/v1/messages', { conv, seq, sender, ...(mentions ? { mentions } : {}) });
  }

  unread(uid: string): Promise<UnreadSummary> {
    return this.api<UnreadSummary>('GET', `/v1/users/${uid}/unread`);
  }
}

/** What the client shows, in the shape of the server's unread summary, to compare the two. */
export function shown(state: RedpointState): Pick<UnreadSummary, 'total' | 'mentions' | 'categories' | 'conversations'> {
  if (!state.totals) throw new Error(`no totals yet (status ${state.status})`);
  return {
    total: state.totals.total,
    mentions: state.totals.mentions,
    categories: sortedKeys(state.totals.categories),
    conversations: state.conversations.map(({ pending: _pending, ...view }) => view),
  };
}

export function truth(summary: UnreadSummary): ReturnType<typeof shown> {
  return { total: summary.total, mentions: summary.mentions, categories: sortedKeys(summary.categories), conversations: summary.conversations };
}

/** Category totals compared as sets: the order of keys means nothing. */
function sortedKeys(record: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1)));
}

export { WebSocket };
