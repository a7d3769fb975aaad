import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEMO_BADGE_HOOK_PATH, DEMO_BADGE_HOOK_SECRET, type ReceivedBadgeEvent } from '../../client-demo/badge-receiver.js';
import { registerRoutes as registerDemoPage } from '../../client-demo/page-routes.js';
import { DEV_API_KEY, DEV_JWT_SECRET } from '../../server/config.js';
import { badgeEvent } from '../../server/hook/badge-event.js';
import { signBody } from '../../server/hook/signature.js';
import { freePort } from '../helpers/processes.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * The dev entry's badge hook receiver (client-demo/badge-receiver.ts) on a real dev-mode server
 * whose badge hook delivers to it, as `npm start` sets it up: the demo page's "push service" line
 * reads what it kept. A read drops the kept badge; a forged or replayed request is refused by the
 * documented signature check and changes nothing; a duplicate is acknowledged and ignored.
 */
let server: TestServer;

beforeAll(async () => {
  const port = await freePort();
  server = await startTestServer({
    routes: registerDemoPage,
    config: {
      port,
      devMode: true,
      apiKey: DEV_API_KEY,
      jwtSecret: DEV_JWT_SECRET,
      badgeHook: {
        webhook: { url: `http://127.0.0.1:${port}${DEMO_BADGE_HOOK_PATH}`, secret: DEMO_BADGE_HOOK_SECRET, timeoutMs: 5_000 },
        intervalMs: 200,
        attempts: 3,
        retryMs: 50,
        parkMs: 1_000,
        concurrency: 4,
        socketlessOnly: false,
      },
    },
  });
});
afterAll(async () => {
  await server?.close();
});

const kept = async (uid: string): Promise<ReceivedBadgeEvent[]> =>
  ((await (await fetch(`${server.url}/demo/badge-events?uid=${encodeURIComponent(uid)}`)).json()) as { events: ReceivedBadgeEvent[] }).events;

function deliver(body: string, headers: Record<string, string>): Promise<Response> {
  return fetch(`${server.url}${DEMO_BADGE_HOOK_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
}
const signed = (body: string, timestamp = Math.floor(Date.now() / 1000), secret = DEMO_BADGE_HOOK_SECRET) => ({
  'redpoint-timestamp': String(timestamp),
  'redpoint-signature': signBody(secret, timestamp, body),
});

describe('the demo badge hook receiver', () => {
  it("keeps the hook's events per user: a message raises the badge, a read on another device drops it", async () => {
    await server.members('pair', { add: ['alice', 'bob'] });
    for (let seq = 1; seq <= 3; seq++) await server.post({ conv: 'pair', seq, sender: 'bob' });
    await vi.waitFor(async () => expect((await kept('alice')).at(-1)?.event.badge.total).toBe(3), { timeout: 10_000, interval: 50 });
    const read = await server.api('POST', '/v1/users/alice/read', { conv: 'pair', seq: 2 });
    expect(read.status).toBe(200);
    const last = await vi.waitFor(
      async () => {
        const event = (await kept('alice')).at(-1)?.event;
        expect(event?.badge.total).toBe(1);
        return event;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(last?.previous?.total).toBe(3);
    expect(last?.change.total).toBe(-2);
  });

  it('refuses a forged, a replayed and an unsigned request, and they change nothing', async () => {
    const before = await kept('mallory');
    const body = JSON.stringify(badgeEvent('mallory', 99, { total: 42, mentions: 0, categories: {} }, null, Date.now()));
    expect((await deliver(body, signed(body, undefined, 'not-the-secret-0123456789abcdef-xyz'))).status).toBe(401);
    expect((await deliver(body, signed(body, Math.floor(Date.now() / 1000) - 3_600))).status).toBe(401);
    expect((await deliver(body, {})).status).toBe(401);
    // A body changed after signing (the signature is over the bytes sent).
    const headers = signed(body);
    expect((await deliver(body.replace('42', '43'), headers)).status).toBe(401);
    expect(await kept('mallory')).toEqual(before);
    // The genuine request is kept; sent again (a retry), it is acknowledged and kept once.
    expect(await (await deliver(body, headers)).json()).toEqual({ kept: true });
    expect(await (await deliver(body, signed(body))).json()).toEqual({ kept: false });
    const events = await kept('mallory');
    expect(events.map((e) => [e.event.seq, e.event.badge.total])).toEqual([[99, 42]]);
  });

  it('needs a uid to list events', async () => {
    expect((await fetch(`${server.url}/demo/badge-events`)).status).toBe(400);
  });
});
