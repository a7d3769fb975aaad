import { SignJWT } from 'jose';
import WebSocket from 'ws';
import { eachLimited, HttpTarget } from './http.js';

/**
 * One heavy user against everyone else (issue 18): a user in thousands of conversations pulls
 * snapshots without a cursor from many sockets (each under the per-connection frame limit), or
 * hammers `/unread` and `/v1/sync` over HTTP, while another user's `GET /unread` is timed. The
 * test (test/gateway/heavy-user.test.ts) and the bench section (bench/scenarios/heavy-user.ts)
 * drive the same load.
 */
export interface FloodTarget {
  port: number;
  apiKey: string;
  jwtSecret: string;
}

export interface FloodOptions {
  /** Conversations the heavy user is in. */
  conversations: number;
  /** Heavy user's sockets (WebSocket flood) or concurrent request loops (HTTP flood). */
  sockets: number;
  /** Pulls per second per socket (under WS_FRAMES_PER_SECOND), or requests per second per HTTP loop. */
  perSecond: number;
  seconds: number;
  transport: 'ws' | 'http';
  /** Distinct names, so several floods can share one server. */
  prefix: string;
}

export interface ProbeStats {
  count: number;
  p50: number;
  p90: number;
  max: number;
  /** Replies other than 200. */
  failed: number;
  /** When the slowest probes (over 100 ms) started, in ms since probing began: a stall's place in the flood. */
  slowAt: number[];
}

export interface FloodResult {
  idle: ProbeStats;
  loaded: ProbeStats;
  heavy: {
    /** Replies carrying data (sync frames / 200s) and their bytes. */
    served: number;
    servedBytes: number;
    /** `rate_limited` errors (WS) or 429s (HTTP), and whether each carried a retry hint. */
    rateLimited: number;
    withRetryHint: number;
    /** Sockets the server closed during the flood, by code. */
    closes: Record<string, number>;
  };
  /** Size of one snapshot of the heavy user (bytes of a JSON `GET /v1/sync`). */
  snapshotBytes: number;
}

const PROBE_EVERY_MS = 20;

function stats(samples: number[], failed: number, slowAt: number[]): ProbeStats {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  return { count: samples.length, p50: at(0.5), p90: at(0.9), max: sorted.at(-1) ?? Number.NaN, failed, slowAt };
}

async function token(secret: string, uid: string): Promise<string> {
  return new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(uid).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(secret));
}

/** Paces a loop: `tick` runs every `everyMs` until `until`, never two at once per loop. */
async function paced(everyMs: number, until: number, tick: () => Promise<void> | void): Promise<void> {
  let next = performance.now();
  while (performance.now() < until) {
    await tick();
    next += everyMs;
    const wait = next - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/** Times the bystander's `/unread` (API key: the probe itself is never rate limited) until `until`. */
async function probe(api: HttpTarget, uid: string, until: number): Promise<ProbeStats> {
  const samples: number[] = [];
  const slowAt: number[] = [];
  let failed = 0;
  const start = performance.now();
  await paced(PROBE_EVERY_MS, until, async () => {
    const t = performance.now();
    const reply = await api.send('GET', `/v1/users/${uid}/unread`).catch(() => ({ status: 0, body: '' }));
    const ms = performance.now() - t;
    samples.push(ms);
    if (ms > 100) slowAt.push(Math.round(t - start));
    if (reply.status !== 200) failed += 1;
  });
  return stats(samples, failed, slowAt);
}

export async function setUpHeavyUser(target: FloodTarget, prefix: string, conversations: number): Promise<{ heavy: string; bystander: string }> {
  const api = new HttpTarget(target.port, { authorization: `Bearer ${target.apiKey}` }, 32);
  const heavy = `${prefix}-heavy`;
  const bystander = `${prefix}-bystander`;
  const convs = Array.from({ length: conversations }, (_, i) => `${prefix}-c${i}`);
  await eachLimited(convs, 32, async (conv, i) => {
    const reply = await api.send('PUT', `/v1/conversations/${conv}/members`, { add: [heavy, `${prefix}-peer${i % 100}`] });
    if (reply.status !== 200) throw new Error(`members ${conv}: ${reply.status} ${reply.body}`);
  });
  for (let i = 0; i < convs.length; i += 1000) {
    const messages = convs.slice(i, i + 1000).map((conv, j) => ({ conv, seq: 1 + ((i + j) % 7), sender: `${prefix}-peer${(i + j) % 100}` }));
    const reply = await api.send('POST', '/v1/messages', { messages });
    if (reply.status !== 200) throw new Error(`messages: ${reply.status} ${reply.body}`);
  }
  for (let i = 0; i < 20; i++) {
    const reply = await api.send('PUT', `/v1/conversations/${prefix}-b${i}/members`, { add: [bystander, `${prefix}-peer${i}`] });
    if (reply.status !== 200) throw new Error(`members: ${reply.status}`);
  }
  api.close();
  return { heavy, bystander };
}

export async function runFlood(target: FloodTarget, options: FloodOptions, users: { heavy: string; bystander: string }): Promise<FloodResult> {
  const api = new HttpTarget(target.port, { authorization: `Bearer ${target.apiKey}` }, 4);
  const heavyToken = await token(target.jwtSecret, users.heavy);
  const heavyHttp = new HttpTarget(target.port, { authorization: `Bearer ${heavyToken}` }, options.sockets + 2);
  // The heavy user may still be over budget from an earlier flood: wait as told, then measure.
  let snapshot = await heavyHttp.send('GET', '/v1/sync');
  while (snapshot.status === 429) {
    await new Promise((resolve) => setTimeout(resolve, Number(snapshot.retryAfter ?? 1) * 1000));
    snapshot = await heavyHttp.send('GET', '/v1/sync');
  }
  const snapshotBytes = snapshot.body.length;
  // Let the snapshot's cost drain from the heavy user's budget before the idle baseline.
  const idle = await probe(api, users.bystander, performance.now() + 2000);
  const heavy: FloodResult['heavy'] = { served: 0, servedBytes: 0, rateLimited: 0, withRetryHint: 0, closes: {} };
  const until = performance.now() + options.seconds * 1000;
  const sockets: WebSocket[] = [];
  const load = options.transport === 'ws' ? floodWs(target.port, heavyToken, options, until, heavy, sockets) : floodHttp(heavyHttp, options, until, heavy);
  const loaded = await probe(api, users.bystander, until);
  await load;
  for (const s of sockets) s.close();
  api.close();
  heavyHttp.close();
  return { idle, loaded, heavy, snapshotBytes };
}

async function floodWs(
  port: number,
  heavyToken: string,
  options: FloodOptions,
  until: number,
  heavy: FloodResult['heavy'],
  sockets: WebSocket[],
): Promise<void> {
  let id = 1;
  await Promise.all(
    Array.from({ length: options.sockets }, async () => {
      const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/ws`);
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.on('close', (code) => {
        if (performance.now() < until) heavy.closes[code] = (heavy.closes[code] ?? 0) + 1;
      });
      socket.on('message', (data: Buffer) => {
        // Only small frames are read: a snapshot is counted by its size, never parsed here, so
        // the load generator spends little of its own time on it.
        if (data.length > 2048) {
          // A large snapshot comes as sync-part frames and a completing sync: one reply served.
          if (data.toString('latin1', 0, 16) !== '{"t":"sync-part"') heavy.served += 1;
          heavy.servedBytes += data.length;
          return;
        }
        const frame = JSON.parse(data.toString()) as { t: string; code?: string; retryAfterMs?: number };
        if (frame.t === 'sync') heavy.served += 1;
        if (frame.t === 'error' && frame.code === 'rate_limited') {
          heavy.rateLimited += 1;
          if (typeof frame.retryAfterMs === 'number') heavy.withRetryHint += 1;
        }
      });
      await new Promise<void>((resolve, reject) => {
        socket.once('open', () => resolve());
        socket.once('error', reject);
      });
      socket.send(JSON.stringify({ t: 'hello', token: heavyToken }));
      await paced(1000 / options.perSecond, until, () => {
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ t: 'pull', id: id++ }));
      });
    }),
  );
}

async function floodHttp(heavyHttp: HttpTarget, options: FloodOptions, until: number, heavy: FloodResult['heavy']): Promise<void> {
  await Promise.all(
    Array.from({ length: options.sockets }, (_, loop) =>
      paced(1000 / options.perSecond, until, async () => {
        const path = loop % 2 === 0 ? '/v1/sync' : `/v1/users/${options.prefix}-heavy/unread`;
        const reply = await heavyHttp.send('GET', path).catch(() => ({ status: 0, body: '', retryAfter: undefined }));
        if (reply.status === 200) {
          heavy.served += 1;
          heavy.servedBytes += reply.body.length;
        } else if (reply.status === 429) {
          heavy.rateLimited += 1;
          if (reply.retryAfter !== undefined) heavy.withRetryHint += 1;
        }
      }),
    ),
  );
}
