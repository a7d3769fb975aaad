import { describe, expect, it } from 'vitest';
import { jsonCodec } from '../../client-demo/sdk/src/codec.js';
import { REQUEST_TIMEOUT_CLOSE, type StatusEvent, type Transport } from '../../client-demo/sdk/src/index.js';
import { Hub } from '../../client-demo/sdk/src/tabs/hub.js';
import { webSocketTransport } from '../../client-demo/sdk/src/transport.js';
import type { ServerFrame } from '../../protocol/frames.js';
import { sdkSuite } from './harness.js';
import { untilServerSockets } from './server-sockets.js';
import { newTap, type Tap, tapped } from './tap.js';
import { convergedTo, synced, unreadOf, until } from './wait.js';

/**
 * The leader tab's hub, in Node, against the real server: several clients (as the tabs of one
 * browser would have) on one WebSocket. Each client is a port of the hub, wired as a tab's own
 * clients are (tabs/group.ts); the BroadcastChannel and Web Locks around it are the browser
 * test's (test/package).
 */
const { h, client } = sdkSuite();

/** A hub over one tapped WebSocket, and a transport that makes each client a port of it. */
function sharedSocket(tap: Tap): { hub: Hub; transport: () => Transport } {
  const hub = new Hub(webSocketTransport(h.wsUrl, tapped(tap), jsonCodec), () => undefined);
  let ports = 0;
  const transport = (): Transport => (events) => {
    const key = `tab/${++ports}`;
    hub.attach(key, { remote: false, deliver: (f) => events.frame(f), end: (code, reason, retryNow) => events.closed(code, reason, retryNow) });
    queueMicrotask(() => events.open());
    return { send: (frame) => hub.receive(key, frame), close: (code) => hub.detach(key, code) };
  };
  return { hub, transport };
}

async function dm(name: string, unread: number): Promise<void> {
  await h.members(name, { add: [`${name}-me`, `${name}-peer`] });
  for (let seq = 1; seq <= unread; seq++) await h.post({ conv: name, seq, sender: `${name}-peer` });
}

describe('the shared socket of a leader tab', () => {
  it('a large snapshot in parts reaches each client whole: the parts of a pull are routed with their reply', async () => {
    const convs = Array.from({ length: 600 }, (_, i) => `hb0-c${String(i).padStart(4, '0')}`);
    for (let i = 0; i < convs.length; i += 50) await Promise.all(convs.slice(i, i + 50).map((conv) => h.members(conv, { add: ['hb0-me', 'hb0-peer'] })));
    await h.post(convs.map((conv) => ({ conv, seq: 2, sender: 'hb0-peer' })));
    const tap = newTap();
    const { transport } = sharedSocket(tap);
    // The first client's snapshot answers the hello (no id); the second's answers a pull (an id).
    const clients = [1, 2].map(() => client('hb0-me', { transport }));
    for (const c of clients) await c.start();
    for (const c of clients) {
      const s = await convergedTo(h, c, 'hb0-me');
      expect(s.conversations).toHaveLength(600);
      expect(s.totals?.total).toBe(1200);
    }
    expect(tap.received.filter((r) => r.frame.t === 'sync-part').length).toBe(4);
  });

  it('three clients on one WebSocket: each is welcomed, synced from its own cursor, and gets every push', async () => {
    await dm('hb1', 2);
    const tap = newTap();
    const { transport } = sharedSocket(tap);
    const clients = [1, 2, 3].map(() => client('hb1-me', { transport }));
    for (const c of clients) await c.start();
    for (const c of clients) await convergedTo(h, c, 'hb1-me');
    await untilServerSockets(h, 1);
    expect(tap.sent.filter((s) => s.frame.t === 'hello')).toHaveLength(1);
    // The other two hellos became pulls, from their own (empty) cursors.
    expect(tap.sent.filter((s) => s.frame.t === 'pull')).toHaveLength(2);

    await h.post({ conv: 'hb1', seq: 3, sender: 'hb1-peer' });
    for (const c of clients) await until(c, (s) => unreadOf(s, 'hb1') === 3, 'the push');
    // Each client counts its request ids from 1; on the shared socket they must not collide.
    clients[1]?.markRead('hb1');
    clients[1]?.flushReads();
    clients[2]?.refresh();
    for (const c of clients) await convergedTo(h, c, 'hb1-me');
    expect((await h.unread('hb1-me')).total).toBe(0);
    const wireIds = tap.sent.map((s) => s.frame).flatMap((f) => ('id' in f ? [f.id] : []));
    expect(new Set(wireIds).size).toBe(wireIds.length);
  });

  it("the server's close code reaches every client (4003: each fetches a new token); they reconnect through the hub", async () => {
    await dm('hb2', 1);
    const tap = newTap();
    const { transport } = sharedSocket(tap);
    let tokens = 0;
    // Both clients' first tokens have expired: whichever hello opens the socket (on a loaded
    // machine either can come first), the server closes it with 4003.
    const token = () => h.token('hb2-me', tokens++ < 2 ? -10 : 3600);
    const clients = [1, 2].map(() => client('hb2-me', { transport, token, backoff: { baseMs: 20, maxMs: 100 } }));
    const codes: Array<number | undefined> = [];
    for (const c of clients) c.on('status', (e: StatusEvent) => e.connection === 'offline' && codes.push(e.closeCode));
    for (const c of clients) await c.start();
    for (const c of clients) await convergedTo(h, c, 'hb2-me');
    expect(codes).toEqual([4003, 4003]);
    // Two at the start, and one more each after the 4003.
    expect(tokens).toBe(4);
    await untilServerSockets(h, 1);
  });

  it('a refused hello (4002) stops every client waiting on it, each with the check the server named', async () => {
    const tap = newTap();
    const { transport } = sharedSocket(tap);
    const clients = [1, 2].map(() => client('hb4-me', { transport, token: async () => 'abc.def.ghi', backoff: { baseMs: 20, maxMs: 100 } }));
    const refusals = clients.map((c) => c.ready().catch((e: unknown) => e));
    await Promise.all(clients.map((c) => c.start()));
    // One hello went out: the second client waited on the socket the first one opened.
    for (const err of await Promise.all(refusals)) {
      expect(err).toMatchObject({ name: 'AuthError', code: 'unauthorized', check: 'malformed', closeCode: 4002, attempts: 1 });
    }
    expect(tap.sent.filter((s) => s.frame.t === 'hello')).toHaveLength(1);
    for (const c of clients) expect(c.state.connection).toBe('auth_failed');
  });

  it('one client whose request goes unanswered makes the hub drop the shared socket; all come back', async () => {
    await dm('hb3', 1);
    let swallowed = false;
    const tap = newTap((frame: ServerFrame, deliver) => {
      if (!swallowed && frame.t === 'ack') {
        swallowed = true;
        return;
      }
      deliver();
    });
    const { transport } = sharedSocket(tap);
    const options = { requestTimeoutMs: 500, backoff: { baseMs: 20, maxMs: 100 }, readBatchMs: 10 };
    const clients = [1, 2].map(() => client('hb3-me', { transport, ...options }));
    const codes: Array<number | undefined> = [];
    clients[0]?.on('status', (e: StatusEvent) => e.connection === 'offline' && codes.push(e.closeCode));
    for (const c of clients) await c.start();
    for (const c of clients) await until(c, synced, 'synced');
    clients[1]?.markRead('hb3');
    // Client 0 never sent anything unanswered: it goes down because the socket was dropped.
    await until(clients[0]!, (s) => s.connection !== 'open', 'client 0 dropped with the socket');
    expect(codes).toEqual([REQUEST_TIMEOUT_CLOSE]);
    for (const c of clients) await convergedTo(h, c, 'hb3-me');
    expect(tap.sockets).toHaveLength(2);
    expect((await h.unread('hb3-me')).total).toBe(0);
  });
});
