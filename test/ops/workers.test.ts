import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Authenticator } from '../../server/auth/tokens.js';
import { workerCount } from '../../server/config.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';

/**
 * WORKERS=N: N server threads of one process serve one port, on the Redis engine; changes reach
 * sockets of every worker through the store's pub/sub; /metrics adds them all up; the port stays
 * this Redpoint's alone; SIGTERM stops every worker.
 */
const api = { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' };

describe('WORKERS', () => {
  let redis: RedisServer;
  const processes: ServerProcess[] = [];
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await redis?.stop();
  });

  it('picks one worker per core in production, one in dev mode and on the memory engine', () => {
    const redisUrl = 'redis://127.0.0.1:1';
    expect(workerCount({ workers: 0, devMode: false, redisUrl, redisClusterNodes: undefined }, 8)).toBe(8);
    expect(workerCount({ workers: 0, devMode: true, redisUrl, redisClusterNodes: undefined }, 8)).toBe(1);
    expect(workerCount({ workers: 3, devMode: true, redisUrl, redisClusterNodes: undefined }, 8)).toBe(3);
    expect(workerCount({ workers: 4, devMode: false, redisUrl: undefined, redisClusterNodes: undefined }, 8)).toBe(1);
  });

  it('two workers serve one port: pushes cross them, /metrics adds them up, a second instance is refused, SIGTERM stops both', async () => {
    // debug: each authenticated connection and each request is logged with its worker.
    const server = await spawnServer({ REDIS_URL: redis.url, WORKERS: '2', LOG_LEVEL: 'debug' });
    processes.push(server);
    const connected = server.lines().filter((l) => l.event === 'store_connected' && String(l.target).startsWith('engine@'));
    expect(new Set(connected.map((l) => l.worker))).toEqual(new Set([0, 1]));
    expect(server.lines().find((l) => l.event === 'listening')).toMatchObject({ workers: 2 });

    // Clients and requests land on both workers (the kernel spreads connections; each POST on a
    // connection of its own); every client hears its message wherever the POST was served.
    const auth = new Authenticator(TEST_JWT_SECRET, TEST_API_KEY);
    const users = Array.from({ length: 16 }, (_, i) => `w${i}`);
    for (const uid of users) {
      const res = await fetch(`${server.url}/v1/conversations/dm-${uid}/members`, {
        method: 'PUT',
        headers: api,
        body: JSON.stringify({ add: [uid, 'sender'] }),
      });
      expect(res.status).toBe(200);
    }
    const sockets = await Promise.all(
      users.map(async (uid) => {
        const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/ws`);
        const frames: { t: string; conv?: string }[] = [];
        ws.on('message', (data) => frames.push(JSON.parse(String(data)) as { t: string }));
        await new Promise((resolve) => ws.once('open', resolve));
        ws.send(JSON.stringify({ t: 'hello', token: await auth.mintUserToken(uid) }));
        await waitUntil(() => frames.some((f) => f.t === 'sync'));
        return { uid, ws, frames };
      }),
    );
    for (const { uid } of sockets) {
      const res = await fetch(`${server.url}/v1/messages`, {
        method: 'POST',
        headers: { ...api, connection: 'close' },
        body: JSON.stringify({ conv: `dm-${uid}`, seq: 1, sender: 'sender' }),
      });
      expect(res.status).toBe(200);
    }
    for (const s of sockets) await waitUntil(() => s.frames.some((f) => f.t === 'change' && f.conv === `dm-${s.uid}`));
    // Else every push could have been made and delivered by one worker: nothing crossed.
    // (The workers' log lines reach stdout through the main thread, a little after the fact.)
    const socketWorkers = () => server.lines().filter((l) => l.msg === 'connection authenticated' && users.includes(String(l.uid)));
    const postWorkers = () => server.lines().filter((l) => l.msg === 'request' && l.method === 'post' && l.url === '/v1/messages');
    await waitUntil(() => socketWorkers().length >= users.length && postWorkers().length >= users.length);
    expect(new Set(socketWorkers().map((l) => l.worker))).toEqual(new Set([0, 1]));
    expect(new Set(postWorkers().map((l) => l.worker))).toEqual(new Set([0, 1]));
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(Number(/^redpoint_ws_connections (\d+)/m.exec(metrics)?.[1])).toBe(users.length);
    expect(Number(/^redpoint_ingest_messages_total (\d+)/m.exec(metrics)?.[1])).toBe(users.length);
    expect(metrics).toMatch(/^redpoint_ready 1$/m);
    expect(metrics.match(/^redpoint_process_cpu_user_seconds_total /gm)).toHaveLength(1);
    for (const s of sockets) s.ws.close();

    // The port is this Redpoint's: another one (with workers or without) is refused.
    for (const workers of ['2', '1']) {
      const second = await spawnServer({ REDIS_URL: redis.url, WORKERS: workers, PORT: String(server.port) }, { waitListening: false });
      processes.push(second);
      expect(await second.exited).toEqual({ code: 1, signal: null });
      expect(second.lines().find((l) => l.event === 'start_failed')?.msg).toMatch(/port is taken|another Redpoint serves it/);
    }

    server.proc.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.lines().some((l) => l.event === 'shutdown_done')).toBe(true);
  }, 180_000);

  it('the memory engine says it runs one worker and does', async () => {
    const server = await spawnServer({ WORKERS: '3', LOG_LEVEL: 'info' });
    processes.push(server);
    expect(server.lines().some((l) => l.event === 'workers_single')).toBe(true);
    expect(server.lines().find((l) => l.event === 'listening')?.workers).toBeUndefined();
  });
});

async function waitUntil(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}
