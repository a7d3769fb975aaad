import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerFrame, SyncFrame } from '../../protocol/frames.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import type { WsClient } from '../helpers/ws-client.js';
import { expectMatchesServer, isChange, isHead, waitMatchesServer } from '../helpers/ws-expect.js';

/**
 * Reconnects with every kind of cursor (recent → delta, older than the retained history →
 * snapshot, another epoch → snapshot, none → snapshot), and the safety net: with
 * `versionEverySeconds: 1`, a client that silently missed a push repairs itself with no further
 * message. Small streams (snapshot every 5 entries, 10 kept) so short tests cross both.
 */
let server: TestServer;
let n = 0;

beforeAll(async () => {
  server = await startTestServer({ largeGroupThreshold: 3, snapshotEvery: 5, streamMaxLen: 10, ws: { versionEverySeconds: 1 } });
});

afterAll(async () => {
  await server?.close();
});

interface World {
  alice: string;
  bob: string;
  dm: string;
  big: string;
  seq: { dm: number; big: number };
}

/** alice and bob in a DM and (with two others) in a read-diffused group. */
async function world(on: TestServer = server): Promise<World> {
  n++;
  const w: World = { alice: `alice-${n}`, bob: `bob-${n}`, dm: `dm-${n}`, big: `big-${n}`, seq: { dm: 0, big: 0 } };
  await on.members(w.dm, { add: [w.alice, w.bob], category: 'private' });
  await on.members(w.big, { add: [w.alice, w.bob, `x-${n}`, `y-${n}`], category: 'group' });
  return w;
}

/** `count` messages from bob, alternating DM and group; each DM message is one entry in alice's stream. */
async function chatter(w: World, count: number, on: TestServer = server): Promise<void> {
  for (let i = 0; i < count; i++) {
    if (i % 2 === 0) await on.post({ conv: w.dm, seq: ++w.seq.dm, sender: w.bob, ...(i % 4 === 0 ? { mentions: [w.alice] } : {}) });
    else await on.post({ conv: w.big, seq: ++w.seq.big, sender: w.bob });
  }
}

function firstSync(c: WsClient): SyncFrame {
  const f = c.frames.find((r) => r.frame.t === 'sync')?.frame;
  if (f?.t !== 'sync') throw new Error('no sync frame');
  return f;
}

describe('reconnect', () => {
  it('with a recent cursor: a delta (no snapshot) brings the kept state up to date', async () => {
    const w = await world();
    await chatter(w, 4);
    const first = await server.client(w.alice);
    await expectMatchesServer(first, server, 'first connection');
    const saved = first.save();
    await first.close();

    // Alice reads on another device, messages arrive: 3 stream entries while she is away.
    await server.api('POST', `/v1/users/${w.alice}/read`, { conv: w.dm, seq: 1 });
    await chatter(w, 4);
    const away = (await server.position(w.alice)).version - (saved.cursor?.version ?? 0);
    expect(away).toBe(3);

    const again = await server.client(w.alice, { saved, binary: true });
    const reply = firstSync(again);
    expect(reply.snapshot).toBeUndefined();
    expect(reply.entries.map((e) => e.v)).toEqual([1, 2, 3].map((i) => (saved.cursor?.version ?? 0) + i));
    // The group's head moved without any stream entry: the reply's heads carry it.
    expect(reply.heads).toEqual({ [w.big]: w.seq.big });
    expect(again.stats.snapshots).toBe(0);
    await expectMatchesServer(again, server, 'after a delta reconnect');
  });

  it('with a cursor older than the retained history: a snapshot', async () => {
    const w = await world();
    const first = await server.client(w.alice);
    const saved = first.save();
    await first.close();

    await chatter(w, 60); // 30 DM entries: far beyond streamMaxLen 10
    const again = await server.client(w.alice, { saved });
    const reply = firstSync(again);
    expect(reply.snapshot).toBeDefined();
    expect(reply.snapshot?.v).toBeGreaterThan(saved.cursor?.version ?? 0);
    expect(again.stats.snapshots).toBe(1);
    await expectMatchesServer(again, server, 'after a snapshot reconnect');
    expect(again.summary()).toMatchObject({ total: 60, mentions: 15 });
  });

  it('with a cursor of another epoch: a snapshot replaces whatever the client kept', async () => {
    const w = await world();
    await chatter(w, 3);
    const first = await server.client(w.alice);
    const saved = first.save();
    await first.close();
    const version = saved.cursor?.version ?? 0;

    // The same version number in a history that is not this one (say, before a store lost its data),
    // with a conversation the server never had.
    const kept = saved.states[0];
    if (!kept) throw new Error('no state kept');
    const forged = { cursor: { epoch: 'another-epoch', version }, states: [...saved.states, { ...kept, conv: 'ghost' }], heads: saved.heads };
    const again = await server.client(w.alice, { saved: forged });
    expect(firstSync(again).snapshot).toBeDefined();
    expect(again.states.has('ghost')).toBe(false);
    await expectMatchesServer(again, server, 'after an epoch change');

    // A real epoch change: a fresh server (empty memory store) knows alice under a new epoch.
    const fresh = await startTestServer({ largeGroupThreshold: 3 });
    try {
      await fresh.members(w.dm, { add: [w.alice, w.bob] });
      const moved = await fresh.client(w.alice, { saved: again.save() });
      expect(moved.cursor?.epoch).not.toBe(again.cursor?.epoch);
      expect(firstSync(moved).snapshot).toBeDefined();
      expect(moved.views()).toMatchObject([{ conv: w.dm, unread: 0 }]);
      await expectMatchesServer(moved, fresh, 'on a server with a new epoch');
    } finally {
      await fresh.close();
    }
  });

  it('with no cursor: a snapshot, then pushes continue from it', async () => {
    const w = await world();
    await chatter(w, 12);
    const c = await server.client(w.alice, { binary: true });
    expect(firstSync(c).snapshot).toBeDefined();
    await expectMatchesServer(c, server, 'from scratch');
    const m = c.mark();
    await chatter(w, 1);
    await c.waitFrame(isChange(w.dm), { since: m });
    expect(c.stats.pullsSent).toBe(0);
    await expectMatchesServer(c, server, 'after a push');
  });

  it('a long catch-up comes in pages: the client follows `more`', async () => {
    const w = await world();
    const c = await server.client(w.alice, { pullLimit: 2 });
    // Four pushes lost on the way, then one more message reveals the gap. (Five behind is not yet
    // "far behind" with snapshots every 5 entries: the catch-up is a delta.)
    for (let i = 0; i < 4; i++) c.dropNext((f) => f.t === 'change');
    await chatter(w, 10);
    await waitMatchesServer(c, server);
    expect(c.stats.pushesDropped).toBe(4);
    // Normally the gap revealed by the 8th push; a version frame (every second) may come first.
    expect(c.stats.gapPulls + c.stats.versionPulls).toBeGreaterThanOrEqual(1);
    const pages = c.frames.filter((r) => r.frame.t === 'sync' && r.frame.id !== undefined).map((r) => r.frame as SyncFrame);
    const full = pages.filter((p) => p.more);
    // 5 entries to catch up, in at most two chains of pages of 2: at least one page said `more`.
    expect(full.length).toBeGreaterThanOrEqual(1);
    expect(pages.every((p) => p.snapshot === undefined)).toBe(true);
    expect(full.every((p) => p.entries.length === 2)).toBe(true);
    expect(pages.at(-1)?.more).toBe(false);
  });
});

describe('safety net: the periodic version frame', () => {
  it('a client that missed a push repairs itself with no further message', async () => {
    const w = await world();
    const c = await server.client(w.alice);
    const m = c.mark();
    c.dropNext((f) => f.t === 'change' && f.conv === w.dm);
    await chatter(w, 1);
    const target = await server.position(w.alice);
    await c.waitFor(() => c.cursor?.version === target.version, 4000, 'repair by the version frame');
    expect(c.stats).toMatchObject({ pushesDropped: 1, pushesApplied: 0, gapPulls: 0 });
    expect(c.stats.versionPulls).toBeGreaterThanOrEqual(1);
    expect(c.framesSince(m).some((f: ServerFrame) => f.t === 'version' && f.version === target.version)).toBe(true);
    await expectMatchesServer(c, server, 'after the safety net');
  });

  it('with every push dropped by the server (testDropPushRatio 1), clients still converge', async () => {
    const lossy = await startTestServer({ largeGroupThreshold: 3, ws: { versionEverySeconds: 1, testDropPushRatio: 1 } });
    try {
      const w = await world(lossy);
      const a = await lossy.client(w.alice);
      const b = await lossy.client(w.alice, { binary: true });
      await chatter(w, 3, lossy);
      const ack = await a.read([[w.dm, w.seq.dm]]);
      expect(ack.t).toBe('ack');
      for (const c of [a, b]) {
        await waitMatchesServer(c, lossy, 4000);
        expect(c.framesOf('change')).toEqual([]);
        expect(c.stats.versionPulls).toBeGreaterThanOrEqual(1);
      }
    } finally {
      await lossy.close();
    }
  });

  it('a lost head push (read diffusion, no version change) is repaired by the periodic check too', async () => {
    const lossy = await startTestServer({ largeGroupThreshold: 3, ws: { versionEverySeconds: 1, testDropPushRatio: 1 } });
    try {
      const w = await world(lossy);
      const c = await lossy.client(w.alice, { binary: true });
      const before = await lossy.position(w.alice);
      await lossy.post({ conv: w.big, seq: 1, sender: w.bob });
      // The user's stream did not move: only a head can tell the client, and its push was lost.
      expect(await lossy.position(w.alice)).toEqual(before);
      await c.waitFrame(isHead(w.big, 1), { timeoutMs: 4000 });
      const got = await expectMatchesServer(c, lossy, 'after the periodic head');
      expect(got.total).toBe(1);
      expect(c.stats.pullsSent).toBe(0);
    } finally {
      await lossy.close();
    }
  });
});
