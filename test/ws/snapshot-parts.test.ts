import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeMsgpack } from '../../protocol/codec.js';
import { LIMITS } from '../../protocol/limits.js';
import type { ConvView, PullReply } from '../../protocol/types.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { expectMatchesServer } from '../helpers/ws-expect.js';

/**
 * PROTOCOL.md "Snapshots in parts": a snapshot of more than LIMITS.snapshotPartConvs
 * conversations reaches a WebSocket client as `sync-part` frames and a completing `sync`, no frame
 * near a megabyte, and over HTTP as one document written in chunks. The client's state is checked
 * against the numbers the test itself posted (not only against the server's own summary).
 */
const user = 'heavy';
const CONVS = 1_234;
let server: TestServer;

function conv(i: number): string {
  return `c${String(i).padStart(5, '0')}`;
}
/** Conversation i has (i % 7) + 1 unread messages from another user. */
function expected(): ConvView[] {
  return Array.from({ length: CONVS }, (_, i) => ({
    conv: conv(i),
    lastSeq: (i % 7) + 1,
    readSeq: 0,
    unread: (i % 7) + 1,
    mentions: 0,
    muted: false,
    markedUnread: false,
    category: 'default',
  }));
}

beforeAll(async () => {
  server = await startTestServer();
  for (let i = 0; i < CONVS; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, CONVS - i) }, (_, k) => server.members(conv(i + k), { add: [user, 'other'] })));
  }
  for (let i = 0; i < CONVS; i += 500) {
    await server.post(Array.from({ length: Math.min(500, CONVS - i) }, (_, k) => ({ conv: conv(i + k), seq: ((i + k) % 7) + 1, sender: 'other' })));
  }
}, 120_000);
afterAll(async () => {
  await server?.close();
});

describe('a large snapshot in parts', () => {
  for (const binary of [false, true]) {
    it(`WebSocket (${binary ? 'MessagePack' : 'JSON'}): the hello's sync and a pull come in parts, each frame small, the state whole`, async () => {
      const c = await server.client(user, { binary });
      const partsPerSnapshot = Math.ceil(CONVS / LIMITS.snapshotPartConvs) - 1;
      expect(c.partsReceived).toBe(partsPerSnapshot);
      expect(c.violations).toEqual([]);
      expect(c.views()).toEqual(expected());
      // A pull without a cursor: the parts carry the pull's id, and its reply is the whole snapshot.
      const m = c.mark();
      const reply = await c.request({ t: 'pull' });
      expect(reply.t).toBe('sync');
      const parts = c.framesOf('sync-part', m);
      expect(parts.length).toBe(partsPerSnapshot);
      expect(new Set(parts.map((p) => p.id))).toEqual(new Set([(reply as { id: number }).id]));
      expect(reply.t === 'sync' && reply.snapshot?.convs.map((s) => s.conv)).toEqual(expected().map((v) => v.conv));
      console.log(`${CONVS} conversations: ${c.partsReceived} parts, largest frame ${c.largestFrameBytes} bytes`);
      expect(c.largestFrameBytes).toBeLessThan(64 * 1024);
      await expectMatchesServer(c, server, 'after the parts');
      await c.close();
    });
  }

  it('an old cursor far behind gets the snapshot in parts and converges', async () => {
    const old = await server.client(user);
    const saved = old.save();
    await old.close();
    // Far more changes than the snapshot interval: the reconnect gets a snapshot.
    for (let i = 0; i < CONVS; i += 500) {
      await server.post(Array.from({ length: Math.min(500, CONVS - i) }, (_, k) => ({ conv: conv(i + k), seq: 10, sender: 'other' })));
    }
    const c = await server.client(user, { saved });
    expect(c.stats.snapshots).toBeGreaterThanOrEqual(1);
    expect(c.partsReceived).toBeGreaterThan(0);
    expect(c.views()).toEqual(expected().map((v) => ({ ...v, lastSeq: 10, unread: 10 })));
    await expectMatchesServer(c, server, 'old cursor');
    await c.close();
  });

  for (const msgpack of [false, true]) {
    it(`GET /v1/sync (${msgpack ? 'MessagePack' : 'JSON'}): one document, sent chunked`, async () => {
      const res = await fetch(`${server.url}/v1/sync`, {
        headers: { authorization: `Bearer ${await server.token(user)}`, ...(msgpack ? { accept: 'application/msgpack' } : {}) },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('transfer-encoding')).toBe('chunked');
      const bytes = new Uint8Array(await res.arrayBuffer());
      const reply = (msgpack ? decodeMsgpack(bytes) : JSON.parse(new TextDecoder().decode(bytes))) as PullReply;
      const position = await server.position(user);
      expect(reply.epoch).toBe(position.epoch);
      expect(reply.snapshot?.convs.length).toBe(CONVS);
      expect(reply.snapshot?.convs.map((s) => s.conv)).toEqual(expected().map((v) => v.conv));
      expect(reply.version).toBeGreaterThanOrEqual(reply.snapshot?.v ?? 0);
      expect(Array.isArray(reply.entries)).toBe(true);
      expect(typeof reply.more).toBe('boolean');
    });
  }
});
