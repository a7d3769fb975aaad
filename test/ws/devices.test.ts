import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AckFrame } from '../../protocol/frames.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import type { WsClient } from '../helpers/ws-client.js';
import { expectMatchesServer, isChange, isError, isHead, waitMatchesServer } from '../helpers/ws-expect.js';

/**
 * Several devices of one user, and large groups, over the real gateway: pushes reach every socket
 * of the user in the format of its hello, reads from one device reach the others, and the totals
 * each device computes equal GET /v1/users/:uid/unread.
 */
let server: TestServer;
let n = 0;
/** Ids unique to each test, so tests sharing the server do not see each other. */
const ids = (...names: string[]): string[] => {
  n++;
  return names.map((name) => `${name}-${n}`);
};

beforeAll(async () => {
  // Threshold 3: a group of 4 is read-diffused.
  server = await startTestServer({ largeGroupThreshold: 3 });
});

afterAll(async () => {
  await server?.close();
});

describe('two devices of one user', () => {
  it('a message reaches both devices; a read on A is acked with the version and reaches B', async () => {
    const [alice, bob, dm] = ids('alice', 'bob', 'dm') as [string, string, string];
    await server.members(dm, { add: [alice, bob], category: 'private' });
    const a = await server.client(alice, { device: 'phone' });
    const b = await server.client(alice, { device: 'laptop', binary: true });
    await expectMatchesServer(a, server, 'A before');
    await expectMatchesServer(b, server, 'B before');

    const [ma, mb] = [a.mark(), b.mark()];
    const pullsBefore = [a.stats.pullsSent, b.stats.pullsSent];
    await server.post({ conv: dm, seq: 1, sender: bob, mentions: [alice] });
    const position = await server.position(alice);
    const pushA = await a.waitFrame(
      isChange(dm, (f) => f.state?.lastSeq === 1),
      { since: ma },
    );
    const pushB = await b.waitFrame(
      isChange(dm, (f) => f.state?.lastSeq === 1),
      { since: mb },
    );
    expect(pushA).toEqual(pushB);
    expect(pushA).toMatchObject({ epoch: position.epoch, v: position.version, state: { readSeq: 0, mentions: 1 } });
    // Applied from the push alone: the next version, no pull needed.
    expect([a.stats.pullsSent, b.stats.pullsSent]).toEqual(pullsBefore);
    for (const c of [a, b]) {
      expect(c.cursor).toEqual(position);
      expect(c.summary()).toMatchObject({ total: 1, mentions: 1, categories: { private: 1 } });
      await expectMatchesServer(c, server, 'after message');
    }

    const mb2 = b.mark();
    const ack = (await a.read([[dm, 1]])) as AckFrame;
    const after = await server.position(alice);
    expect(ack).toEqual({ t: 'ack', id: ack.id, epoch: after.epoch, version: after.version });
    expect(after.version).toBe(position.version + 1);
    const readPush = await b.waitFrame(
      isChange(dm, (f) => f.state?.readSeq === 1),
      { since: mb2 },
    );
    expect(readPush.v).toBe(ack.version);
    // A gets its own read as a push too (every socket of the user is on the user's topic).
    await a.waitFor(() => a.cursor?.version === ack.version, 5000, 'A at the ack version');
    for (const c of [a, b]) {
      expect(c.summary()).toMatchObject({ total: 0, mentions: 0, categories: {} });
      await expectMatchesServer(c, server, 'after read');
    }
  });

  it('settings and deletes from one device reach the other', async () => {
    const [alice, bob, g] = ids('alice', 'bob', 'g') as [string, string, string];
    await server.members(g, { add: [alice, bob], category: 'group' });
    await server.post([
      { conv: g, seq: 1, sender: bob },
      { conv: g, seq: 2, sender: bob },
    ]);
    const a = await server.client(alice, { binary: true });
    const b = await server.client(alice);
    expect(b.summary().total).toBe(2);

    const muted = (await a.settings(g, { muted: true })) as AckFrame;
    expect(muted.t).toBe('ack');
    await b.waitFor(() => b.cursor?.version === muted.version, 5000, 'mute push');
    expect(b.summary()).toMatchObject({ total: 0, conversations: [{ conv: g, unread: 2, muted: true }] });
    await expectMatchesServer(b, server, 'after mute');

    const deleted = (await b.settings(g, { deleted: true })) as AckFrame;
    expect(deleted.t).toBe('ack');
    await a.waitFor(() => a.cursor?.version === deleted.version, 5000, 'delete push');
    expect(a.views()).toEqual([]);
    await expectMatchesServer(a, server, 'after delete');

    // The next message brings the conversation back on both.
    await server.post({ conv: g, seq: 3, sender: bob });
    for (const c of [a, b]) {
      const got = await waitMatchesServer(c, server);
      expect(got.conversations).toMatchObject([{ conv: g, unread: 1 }]);
    }
  });
});

describe('large groups (read diffusion)', () => {
  it("a recall, an @all and a message's time reach another device's count with the head push, before any pull; so does a late recall that moves no head", async () => {
    const [alice, bob, carol, dave, big] = ids('alice', 'bob', 'carol', 'dave', 'big') as [string, string, string, string, string];
    expect((await server.members(big, { add: [alice, bob, carol, dave], category: 'group' })).large).toBe(true);
    const phone = await server.client(alice);
    const laptop = await server.client(alice, { binary: true });
    await server.post([
      { conv: big, seq: 1, sender: bob },
      { conv: big, seq: 2, sender: bob },
    ]);
    for (const c of [phone, laptop]) await waitMatchesServer(c, server);
    const pulls = [phone.stats.pullsSent, laptop.stats.pullsSent];
    const marks = [phone.mark(), laptop.mark()];

    // Seq 3 recalls seq 2 and does not count itself; seq 4 is an @all with a time.
    await server.post({ conv: big, seq: 3, sender: bob, counts: false, recalls: [2] });
    await server.post({ conv: big, seq: 4, sender: carol, mentionAll: true, at: 1_765_000_000_000 });
    for (const [i, c] of [phone, laptop].entries()) await c.waitFrame(isHead(big, 4), { since: marks[i] });
    for (const c of [phone, laptop]) {
      const got = await expectMatchesServer(c, server, 'after the pushes');
      expect(got.conversations).toMatchObject([{ conv: big, lastSeq: 4, unread: 2, mentions: 1, at: 1_765_000_000_000 }]);
    }
    // A message held back upstream: seq 6 first, then seq 5 recalling seq 1, below the head.
    await server.post({ conv: big, seq: 6, sender: bob });
    for (const c of [phone, laptop]) await c.waitFrame(isHead(big, 6));
    const late = [phone.mark(), laptop.mark()];
    await server.post({ conv: big, seq: 5, sender: bob, counts: false, recalls: [1] });
    for (const [i, c] of [phone, laptop].entries()) {
      await c.waitFrame((f) => f.t === 'head' && f.conv === big && f.nocount?.includes(1) === true, { since: late[i] });
      const got = await expectMatchesServer(c, server, 'after the late recall');
      expect(got.conversations).toMatchObject([{ conv: big, lastSeq: 6, unread: 2, mentions: 1 }]);
    }
    // Not one pull was needed.
    expect([phone.stats.pullsSent, laptop.stats.pullsSent]).toEqual(pulls);
  });

  it('one head push per message to every member socket, no stream entry for readers', async () => {
    const [alice, bob, carol, dave, big] = ids('alice', 'bob', 'carol', 'dave', 'big') as [string, string, string, string, string];
    const res = await server.members(big, { add: [alice, bob, carol, dave], category: 'group' });
    expect(res.large).toBe(true);
    const a1 = await server.client(alice);
    const a2 = await server.client(alice, { binary: true });
    const c = await server.client(carol, { binary: true });
    const before = await server.position(alice);
    const marks = [a1.mark(), a2.mark(), c.mark()];

    await server.post({ conv: big, seq: 1, sender: bob });
    for (const [i, client] of [a1, a2, c].entries()) {
      await client.waitFrame(isHead(big, 1), { since: marks[i] });
    }
    // A later frame on each socket proves nothing else was queued for this message before it.
    for (const client of [a1, a2, c]) await client.sync();
    for (const [i, client] of [a1, a2, c].entries()) {
      expect(client.framesOf('head', marks[i])).toEqual([{ t: 'head', conv: big, lastSeq: 1 }]);
      expect(client.framesOf('change', marks[i])).toEqual([]);
    }
    // Read diffusion: the member's stream did not move, yet the unread count did (through the head).
    expect(await server.position(alice)).toEqual(before);
    expect(a1.summary()).toMatchObject({ total: 1, conversations: [{ conv: big, lastSeq: 1, unread: 1 }] });
    for (const client of [a1, a2, c]) await expectMatchesServer(client, server, 'after head');

    // A read from one device: a change push (readSeq) to the other.
    const ack = (await a2.read([[big, 1]])) as AckFrame;
    await a1.waitFor(() => a1.cursor?.version === ack.version, 5000, 'read of the large group');
    expect(a1.summary().total).toBe(0);
    await expectMatchesServer(a1, server, 'after read');
  });

  it('joining subscribes to the group head, leaving unsubscribes', async () => {
    const [alice, bob, carol, dave, erin, big] = ids('alice', 'bob', 'carol', 'dave', 'erin', 'big') as [string, string, string, string, string, string];
    await server.members(big, { add: [alice, bob, carol, dave] });
    const a = await server.client(alice);
    const c = await server.client(carol);
    const e = await server.client(erin, { binary: true });

    let marks = [a.mark(), c.mark(), e.mark()];
    await server.post({ conv: big, seq: 1, sender: bob });
    await a.waitFrame(isHead(big, 1), { since: marks[0] });
    await c.waitFrame(isHead(big, 1), { since: marks[1] });
    // The publish reached every subscribed socket before A saw it; a pull answered after that
    // proves E (not a member) was not among them.
    await e.sync();
    expect(e.framesOf('head', marks[2])).toEqual([]);

    // Erin joins while connected: the join push subscribes her socket to the group's head.
    const me = e.mark();
    await server.members(big, { add: [erin] });
    await e.waitFrame(
      isChange(big, (f) => f.state?.large === true),
      { since: me },
    );
    // Carol leaves while connected: the leave push (state null) unsubscribes her socket.
    const mc = c.mark();
    await server.members(big, { remove: [carol] });
    await c.waitFrame(
      isChange(big, (f) => f.state === null),
      { since: mc },
    );

    marks = [a.mark(), c.mark(), e.mark()];
    await server.post({ conv: big, seq: 2, sender: bob });
    await a.waitFrame(isHead(big, 2), { since: marks[0] });
    await e.waitFrame(isHead(big, 2), { since: marks[2] });
    await c.sync();
    expect(c.framesOf('head', marks[1])).toEqual([]);
    expect(c.views()).toEqual([]);
    // Erin joined at seq 1: only seq 2 is unread for her.
    expect(e.summary()).toMatchObject({ total: 1, conversations: [{ conv: big, lastSeq: 2, readSeq: 1, unread: 1 }] });
    for (const client of [a, c, e]) await expectMatchesServer(client, server, 'after join/leave');
  });

  it('a group that grows past the threshold while members are online switches them to heads', async () => {
    const [alice, bob, carol, dave, g] = ids('alice', 'bob', 'carol', 'dave', 'g') as [string, string, string, string, string];
    await server.members(g, { add: [alice, bob, carol] });
    const a = await server.client(alice, { binary: true });
    await server.post({ conv: g, seq: 1, sender: bob });
    await waitMatchesServer(a, server);
    expect(a.framesOf('change').some((f) => f.conv === g && f.state?.lastSeq === 1)).toBe(true);

    const m = a.mark();
    expect((await server.members(g, { add: [dave] })).large).toBe(true);
    await a.waitFrame(
      isChange(g, (f) => f.state?.large === true),
      { since: m },
    );
    const m2 = a.mark();
    await server.post({ conv: g, seq: 2, sender: bob });
    await a.waitFrame(isHead(g, 2), { since: m2 });
    const got = await expectMatchesServer(a, server, 'after the switch');
    expect(got.conversations).toMatchObject([{ conv: g, lastSeq: 2, unread: 2 }]);
  });
});

describe('formats', () => {
  it('binary (MessagePack) and text (JSON) clients both work and are answered in kind', async () => {
    const [alice, bob, dm, big, x, y] = ids('alice', 'bob', 'dm', 'big', 'x', 'y') as [string, string, string, string, string, string];
    await server.members(dm, { add: [alice, bob] });
    await server.members(big, { add: [alice, bob, x, y] });
    const text = await server.client(alice);
    const bin = await server.client(alice, { binary: true });
    await server.post([
      { conv: dm, seq: 1, sender: bob },
      { conv: big, seq: 1, sender: bob },
    ]);
    for (const c of [text, bin]) {
      await c.waitFrame(isHead(big, 1));
      await waitMatchesServer(c, server);
      const ack = await c.read([[dm, 1]]);
      expect(ack.t).toBe('ack');
      const err = await c.request({ t: 'settings', conv: 'no-such-conv', muted: true });
      expect(err).toMatchObject({ t: 'error', code: 'unknown_conversation' });
      c.sendRaw(c === bin ? new Uint8Array([0x81, 0xa1]) : '{"t":', c === bin);
      await c.waitFrame(isError('bad_json'));
      await c.sync();
    }
    // Every kind of server frame was seen, and each in the client's own format.
    for (const [c, binary] of [
      [text, false],
      [bin, true],
    ] as Array<[WsClient, boolean]>) {
      const kinds = new Set(c.frames.map((r) => r.frame.t));
      expect([...kinds].sort()).toEqual(['ack', 'change', 'error', 'head', 'sync', 'welcome']);
      expect(c.frames.filter((r) => r.binary !== binary)).toEqual([]);
      await expectMatchesServer(c, server, binary ? 'binary client' : 'text client');
    }
  });
});
