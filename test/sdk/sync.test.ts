import { describe, expect, it } from 'vitest';
import { MemoryCache, type RedpointClient, type RedpointState } from '../../client-demo/sdk/src/index.js';
import { msgpack } from '../../client-demo/sdk/src/msgpack.js';
import type { ServerFrame } from '../../protocol/frames.js';
import { sdkSuite } from './harness.js';
import { newTap, type Tap, tapped } from './tap.js';
import { convergedTo, synced, unreadOf, until } from './wait.js';

const { h, client } = sdkSuite({ largeGroupThreshold: 3 });

function converged(c: RedpointClient, uid: string): Promise<RedpointState> {
  return convergedTo(h, c, uid);
}

describe('sync', () => {
  it('shows NO_DATA (no totals) until the first sync, then exactly what the server has', async () => {
    await h.members('s1-dm', { add: ['s1-alice', 's1-bob'], category: 'private' });
    await h.members('s1-team', { add: ['s1-alice', 's1-bob', 's1-carol'], category: 'group' });
    await h.post({ conv: 's1-dm', seq: 1, sender: 's1-bob' });
    await h.post({ conv: 's1-dm', seq: 2, sender: 's1-bob' });
    await h.post({ conv: 's1-team', seq: 1, sender: 's1-carol', mentions: ['s1-alice'] });
    const c = client('s1-alice');
    expect(c.state.status).toBe('NO_DATA');
    expect(c.state.totals).toBeNull();
    const statuses: string[] = [];
    c.on('status', (s) => statuses.push(s.status));
    await c.start();
    expect(c.state.totals).toBeNull();
    const s = await converged(c, 's1-alice');
    expect(s.totals).toEqual({ total: 3, mentions: 1, categories: { private: 2, group: 1 } });
    expect(statuses[0]).toBe('NO_DATA');
    expect(statuses.at(-1)).toBe('SYNCED');
  });

  it('follows pushes live: messages, mute, mark unread, delete, for two devices of one user', async () => {
    await h.members('s2-dm', { add: ['s2-alice', 's2-bob'], category: 'private' });
    const a = client('s2-alice', { device: 'A' });
    const b = client('s2-alice', { device: 'B', codec: msgpack });
    await Promise.all([a.start(), b.start()]);
    await Promise.all([until(a, synced, 'A synced'), until(b, synced, 'B synced')]);
    await h.post({ conv: 's2-dm', seq: 1, sender: 's2-bob', mentions: ['s2-alice'] });
    await h.post({ conv: 's2-dm', seq: 2, sender: 's2-bob' });
    for (const c of [a, b]) await until(c, (s) => unreadOf(s, 's2-dm') === 2, 'the dot');
    expect(b.state.totals?.mentions).toBe(1);

    await a.mute('s2-dm');
    await until(b, (s) => s.conversations[0]?.muted === true && s.totals?.total === 0, 'muted on B');
    await a.mute('s2-dm', false);
    await a.markUnread('s2-dm');
    await until(b, (s) => s.conversations[0]?.markedUnread === true, 'marked unread on B');
    await a.deleteConversation('s2-dm');
    await until(b, (s) => s.conversations.length === 0 && s.totals?.total === 0, 'deleted on B');
    await h.post({ conv: 's2-dm', seq: 3, sender: 's2-bob' });
    await until(b, (s) => unreadOf(s, 's2-dm') === 1, 'back with the next message');
    await converged(a, 's2-alice');
    await converged(b, 's2-alice');
  });

  it('counts read-diffused groups from their heads', async () => {
    const members = ['s3-alice', 's3-b', 's3-c', 's3-d', 's3-e'];
    await h.members('s3-big', { add: members, category: 'group' });
    const c = client('s3-alice');
    await c.start();
    await until(c, synced, 'synced');
    for (let seq = 1; seq <= 4; seq++) await h.post({ conv: 's3-big', seq, sender: 's3-b' });
    await until(c, (s) => unreadOf(s, 's3-big') === 4, 'four unread from head pushes');
    c.markRead('s3-big');
    expect(unreadOf(c.state, 's3-big')).toBe(0);
    await converged(c, 's3-alice');
  });

  it("a head push for a row not yet held as read-diffused (its change behind it) pulls: the push's @all and time are not lost", async () => {
    // Found by random.test.ts (REDPOINT_SDK_SEED=3): a topic's first message in a read-diffused
    // group brings the member's new row in a `change` and the @all and time in a `head` push; when
    // the head is applied first (the change held by a gap or a pull in flight, here by the tap),
    // the store had dropped what it carried, and nothing brought it back before the next pull.
    await h.members('s5-big', { add: ['s5-alice', 's5-b', 's5-c', 's5-d'], category: 'group' });
    const tap = newTap((frame, deliver) => {
      if (frame.t === 'change' && frame.conv === 's5-big#t:x') setTimeout(() => deliver(), 200);
      else deliver();
    });
    const c = client('s5-alice', { WebSocket: tapped(tap) });
    await c.start();
    await until(c, synced, 'synced');
    await h.post({ conv: 's5-big', topic: 'x', seq: 1, sender: 's5-b', mentionAll: true, at: 1_760_000_000_000 });
    const row = (await h.unread('s5-alice')).conversations.find((v) => v.conv === 's5-big#t:x');
    expect(row).toMatchObject({ unread: 1, mentions: 1, at: 1_760_000_000_000 });
    // No version frame comes for two minutes: only the pull the head makes can bring them.
    const s = await converged(c, 's5-alice');
    expect(s.conversations.find((v) => v.conv === 's5-big#t:x')).toMatchObject({ mentions: 1, at: 1_760_000_000_000 });
  });

  it('a client far behind catches up from a snapshot and lands on the same state', async () => {
    await h.members('s4-dm', { add: ['s4-alice', 's4-bob'], category: 'private' });
    const cache = new MemoryCache();
    const first = client('s4-alice', { cache });
    await first.start();
    await converged(first, 's4-alice');
    await first.stop();
    // Far more changes than the stream keeps (snapshot every 5, 10 entries kept).
    const convs = Array.from({ length: 30 }, (_, i) => `s4-g${i}`);
    for (const conv of convs) await h.members(conv, { add: ['s4-alice', 's4-bob'], category: 'group' });
    for (const conv of convs) await h.post({ conv, seq: 1, sender: 's4-bob' });
    const tap = newTap();
    const second = client('s4-alice', { cache, WebSocket: tapped(tap) });
    await second.start();
    expect(second.state.conversations).toHaveLength(1);
    await converged(second, 's4-alice');
    expect(second.state.conversations).toHaveLength(31);
    const hello = tap.sent.find((s) => s.frame.t === 'hello')?.frame;
    expect(hello && 'cursor' in hello ? hello.cursor : undefined).toEqual(first.state.cursor);
    expect(tap.received.some((r) => r.frame.t === 'sync' && r.frame.snapshot !== undefined)).toBe(true);
  });
});

/**
 * A tap that holds back the frames `hold` picks until `release()`, then delivers them in the
 * order they came; every other frame passes at once. `held` resolves once one is held.
 */
function holdingTap(hold: (frame: ServerFrame) => boolean) {
  const waiting: Array<() => void> = [];
  let holding = true;
  let heldOne: () => void = () => undefined;
  const held = new Promise<void>((resolve) => {
    heldOne = resolve;
  });
  const tap = newTap((frame, deliver) => {
    if (!holding || !hold(frame)) return deliver();
    waiting.push(() => deliver());
    heldOne();
  });
  const release = (): void => {
    holding = false;
    for (const deliver of waiting.splice(0)) deliver();
  };
  return { tap, held, release };
}

/** Waits until a `head` push of `conv` came through `tap` (frames not held are delivered as they come). */
async function headOf(tap: Tap, conv: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!tap.received.some((r) => r.frame.t === 'head' && r.frame.conv === conv)) {
    if (Date.now() > deadline) throw new Error(`no head push of ${conv}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('a head push that arrives before a pull reply read before it', () => {
  // No version frame comes for two minutes: whatever the head carried must survive the reply.
  it("a brand-new row: the head arrives, then the reply read before it, then the row's change; its @all and time are kept", async () => {
    await h.members('s7-big', { add: ['s7-alice', 's7-b', 's7-c', 's7-d'], category: 'group' });
    const topic = 's7-big#t:x';
    const { tap, held, release } = holdingTap((f) => (f.t === 'sync' && f.id !== undefined) || (f.t === 'change' && f.conv === topic));
    const c = client('s7-alice', { WebSocket: tapped(tap) });
    await c.start();
    await until(c, synced, 'synced');
    // A pull, answered (read) now, its reply held back.
    c.refresh();
    await held;
    await h.post({ conv: 's7-big', topic: 'x', seq: 1, sender: 's7-b', mentionAll: true, at: 1_760_000_000_000 });
    await headOf(tap, topic);
    release();
    const s = await converged(c, 's7-alice');
    expect(s.conversations.find((v) => v.conv === topic)).toMatchObject({ unread: 1, mentions: 1, at: 1_760_000_000_000 });
  });

  it("a row held as read-diffused, the reply from another epoch (the user's stream started over): its head, @all and time are kept", async () => {
    await h.members('s8-big', { add: ['s8-alice', 's8-b', 's8-c', 's8-d'], category: 'group' });
    await h.post({ conv: 's8-big', seq: 1, sender: 's8-b' });
    let epoch = '';
    const { tap, held, release } = holdingTap((f) => f.t === 'sync' && epoch !== '' && f.epoch !== epoch);
    const c = client('s8-alice', { WebSocket: tapped(tap) });
    await c.start();
    epoch = (await until(c, synced, 'synced')).cursor?.epoch ?? '';
    // The setting starts the user's stream over: the client pulls a snapshot of the new epoch, held back.
    await h.ok('PUT', '/v1/users/s8-alice/settings', { mutedMentions: true });
    await held;
    await h.post({ conv: 's8-big', seq: 2, sender: 's8-b', mentionAll: true, at: 1_760_000_000_000 });
    await until(c, (s) => unreadOf(s, 's8-big') === 2, 'the head push applied');
    release();
    const s = await converged(c, 's8-alice');
    expect(s.cursor?.epoch).not.toBe(epoch);
    expect(s.conversations.find((v) => v.conv === 's8-big')).toMatchObject({ unread: 2, mentions: 1, at: 1_760_000_000_000 });
  });
});

describe('a large snapshot in parts', () => {
  it('the SDK assembles sync-part frames into one snapshot: every conversation, nothing applied from a part', async () => {
    const n = 700;
    const convs = Array.from({ length: n }, (_, i) => `s6-c${String(i).padStart(4, '0')}`);
    for (let i = 0; i < n; i += 50) await Promise.all(convs.slice(i, i + 50).map((conv) => h.members(conv, { add: ['s6-alice', 's6-bob'] })));
    await h.post(convs.map((conv, i) => ({ conv, seq: (i % 4) + 1, sender: 's6-bob' })));
    const tap = newTap();
    const c = client('s6-alice', { WebSocket: tapped(tap), codec: msgpack });
    await c.start();
    const s = await converged(c, 's6-alice');
    expect(tap.received.filter((r) => r.frame.t === 'sync-part').length).toBe(2);
    // The numbers the test posted, not only the server's summary.
    expect(s.conversations.map((v) => [v.conv, v.unread])).toEqual(convs.map((conv, i) => [conv, (i % 4) + 1]));
    expect(s.totals?.total).toBe(convs.reduce((sum, _c, i) => sum + (i % 4) + 1, 0));
  });
});

describe('page lifecycle', () => {
  it('pulls when the page becomes visible again', async () => {
    const doc = Object.assign(new EventTarget(), { visibilityState: 'hidden' });
    const g = globalThis as { document?: unknown };
    g.document = doc;
    try {
      await h.members('s5-dm', { add: ['s5-alice', 's5-bob'] });
      const tap = newTap();
      const c = client('s5-alice', { WebSocket: tapped(tap), lifecycle: true });
      await c.start();
      await until(c, synced, 'synced');
      const pulls = () => tap.sent.filter((s) => s.frame.t === 'pull').length;
      const before = pulls();
      doc.dispatchEvent(new Event('visibilitychange'));
      expect(pulls()).toBe(before);
      doc.visibilityState = 'visible';
      doc.dispatchEvent(new Event('visibilitychange'));
      expect(pulls()).toBe(before + 1);
      await until(c, synced, 'synced after the pull');
    } finally {
      delete g.document;
    }
  });
});
