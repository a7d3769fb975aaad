import type { TestServer } from '../helpers/test-server.js';

/** The server's open WebSockets, from its /metrics (redpoint_ws_connections). */
export async function serverSockets(h: TestServer): Promise<number> {
  const text = (await h.request('GET', '/metrics', { auth: 'none' })).text;
  return Number(/^redpoint_ws_connections (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
}

/** Waits (polling /metrics: the count has no event to wait for) until the server has `n` open WebSockets. */
export async function untilServerSockets(h: TestServer, n: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = await serverSockets(h);
    if (now === n) return;
    if (Date.now() > deadline) throw new Error(`the server has ${now} WebSockets, not ${n}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
