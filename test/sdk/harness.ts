import { afterAll, afterEach, beforeAll } from 'vitest';
import WebSocket from 'ws';
import { type ClientOptions, RedpointClient } from '../../client-demo/sdk/src/index.js';
import { startTestServer, type TestServer, type TestServerOptions } from '../helpers/test-server.js';
import { newTap, type Tap, tapped } from './tap.js';
import { synced, until } from './wait.js';

/**
 * The SDK tests' server: the shared test server, restartable (it can be stopped and started
 * again on the same port over the same engine, a server restart that keeps the state, as with
 * Redis; clients reach it through a FrontDoor, see there for why), and with no large groups
 * unless a test asks for them (threshold 500).
 */
export type Harness = TestServer;
export type HarnessOptions = Omit<TestServerOptions, 'restartable'>;

export function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  return startTestServer({ largeGroupThreshold: 500, ...options, restartable: true });
}

export interface SdkSuite {
  /** The file's harness: started before its first test, closed after its last. */
  readonly h: Harness;
  /** A client of `uid` on the harness (not started; `ws` sockets, `lifecycle: false`), stopped after the test. */
  client(uid: string, options?: Partial<ClientOptions>): RedpointClient;
  /** `client()` over a tapped socket, started and synced. */
  started(uid: string, tap?: Tap, options?: Partial<ClientOptions>): Promise<RedpointClient>;
}

/**
 * The set-up an SDK test file shares: a harness for the whole file and clients for one test.
 * After each test its clients are stopped and a server it took down is brought up again.
 */
export function sdkSuite(options: HarnessOptions = {}): SdkSuite {
  let current: Harness | undefined;
  const clients: RedpointClient[] = [];
  beforeAll(async () => {
    current = await startHarness(options);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.stop()));
    if (current && !current.running) await current.up();
  });
  afterAll(async () => {
    await current?.close();
  });

  // The file's code takes `h` before beforeAll has run: it stands for the harness once started.
  const h = new Proxy({} as Harness, {
    get(_target, prop) {
      if (!current) throw new Error('the harness starts in beforeAll: use it in hooks and tests only');
      const value: unknown = Reflect.get(current, prop, current);
      return typeof value === 'function' ? value.bind(current) : value;
    },
  });
  const client = (uid: string, extra: Partial<ClientOptions> = {}): RedpointClient => {
    const c = new RedpointClient({ url: h.wsUrl, token: () => h.token(uid), WebSocket, lifecycle: false, ...extra });
    clients.push(c);
    return c;
  };
  const started = async (uid: string, tap: Tap = newTap(), extra: Partial<ClientOptions> = {}): Promise<RedpointClient> => {
    const c = client(uid, { WebSocket: tapped(tap), ...extra });
    await c.start();
    await until(c, synced, `${uid} synced`);
    return c;
  };
  return { h, client, started };
}
