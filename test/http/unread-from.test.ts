import { describe, expect, it } from 'vitest';
import type { ConvState } from '../../protocol/types.js';
import { serversPerTest } from '../helpers/servers-per-test.js';
import type { TestServer } from '../helpers/test-server.js';

interface ChangeReply {
  changed: boolean;
  epoch: string;
  version: number;
  state: ConvState;
}

/**
 * "Unread from here" (POST /v1/users/:uid/conversations/:conv/unread-from and the WebSocket
 * `unread-from` frame) on both engines, through the API: two devices of one user, a read and an
 * unread-from racing in both arrival orders, mentions above the new position counting again, and
 * bad input refused without a change. The rule itself is rules.ts's (test/engine/rules.test.ts,
 * the conformance suite).
 */
describe.each(['memory', 'redis'] as const)('unread from here (%s)', (engine) => {
  const startServer = serversPerTest(engine);
  /** alice and bob in `team`, 30 messages from bob, alice mentioned in 8, 12 and 25; alice read to 5. */
  const start = async (): Promise<TestServer> => {
    const s = await startServer();
    await s.members('team', { add: ['alice', 'bob'] });
    await s.post(
      Array.from({ length: 30 }, (_, i) => ({ conv: 'team', seq: i + 1, sender: 'bob', ...([8, 12, 25].includes(i + 1) ? { mentions: ['alice'] } : {}) })),
    );
    await s.ok('POST', '/v1/users/alice/read', { conv: 'team', seq: 5 });
    return s;
  };
  const teamOf = async (s: TestServer) => (await s.unread('alice')).conversations.find((c) => c.conv === 'team');
  const readA = { conv: 'team', seq: 20, gen: 0 };
  const unreadB = { seq: 10, gen: 1 };

  it('device A reads to 20, then device B marks unread from 10: readSeq 9, the mentions at 12 and 25 count again', async () => {
    const s = await start();
    expect((await s.ok<ChangeReply>('POST', '/v1/users/alice/read', readA)).state).toMatchObject({ readSeq: 20, mentions: 1 });
    const after = await s.ok<ChangeReply>('POST', '/v1/users/alice/conversations/team/unread-from', unreadB);
    expect(after).toMatchObject({ changed: true, state: { readSeq: 9, readGen: 1, mentions: 2 } });
    expect(await teamOf(s)).toMatchObject({ readSeq: 9, unread: 21, mentions: 2 });
    expect(await s.unread('alice')).toMatchObject({ total: 21, mentions: 2 });
  });

  it("device B marks unread from 10 first, then device A's read made before it arrives: ignored, readSeq stays 9", async () => {
    const s = await start();
    await s.ok('POST', '/v1/users/alice/conversations/team/unread-from', unreadB);
    expect(await s.ok<ChangeReply>('POST', '/v1/users/alice/read', readA)).toMatchObject({ changed: false, state: { readSeq: 9, readGen: 1 } });
    expect(await teamOf(s)).toMatchObject({ readSeq: 9, unread: 21, mentions: 2 });
    // The retry of the unread-from (its reply was lost) changes nothing; a read made after it raises.
    expect(await s.ok<ChangeReply>('POST', '/v1/users/alice/conversations/team/unread-from', unreadB)).toMatchObject({ changed: false });
    expect((await s.ok<ChangeReply>('POST', '/v1/users/alice/read', { ...readA, gen: 1 })).state).toMatchObject({ readSeq: 20, mentions: 1 });
  });

  it('two devices: the one that marks over its socket gets an ack, the other sees readSeq go down as a change; reads over the socket carry the generation', async () => {
    const s = await start();
    const phone = await s.client('alice');
    const laptop = await s.client('alice');
    await phone.sync();
    await laptop.sync();
    await laptop.read([['team', 20]]);
    const mark = phone.mark();
    expect(await laptop.request({ t: 'unread-from', conv: 'team', seq: 10, gen: 1 })).toMatchObject({ t: 'ack' });
    const change = await phone.waitFrame((f) => f.t === 'change' && f.conv === 'team' && f.state?.readSeq === 9, { since: mark, label: 'the unread-from' });
    expect(change).toMatchObject({ state: { readSeq: 9, readGen: 1, mentions: 2 } });
    // The phone's read made in generation 0 (before it saw the change) is ignored; one in generation 1 applies.
    expect(await phone.request({ t: 'read', reads: [['team', 20, 0]] })).toMatchObject({ t: 'ack' });
    expect(await teamOf(s)).toMatchObject({ readSeq: 9 });
    expect(await phone.request({ t: 'read', reads: [['team', 15, 1]] })).toMatchObject({ t: 'ack' });
    expect(await teamOf(s)).toMatchObject({ readSeq: 15 });
  });

  it('a read-diffused (large) group keeps the same register: the unread-from lowers it, the head counts from there', async () => {
    const s = await startServer({ largeGroupThreshold: 2 });
    expect(await s.members('big', { add: ['alice', 'bob', 'carol'] })).toMatchObject({ large: true });
    await s.post(Array.from({ length: 8 }, (_, i) => ({ conv: 'big', seq: i + 1, sender: 'bob', ...(i + 1 === 6 ? { mentions: ['alice'] } : {}) })));
    await s.ok('POST', '/v1/users/alice/read', { conv: 'big', seq: 8 });
    const after = await s.ok<ChangeReply>('POST', '/v1/users/alice/conversations/big/unread-from', { seq: 5, gen: 1 });
    expect(after.state).toMatchObject({ large: true, readSeq: 4, readGen: 1, mentions: 1 });
    const big = (await s.unread('alice')).conversations.find((c) => c.conv === 'big');
    expect(big).toMatchObject({ lastSeq: 8, readSeq: 4, unread: 4, mentions: 1 });
    expect(await s.ok<ChangeReply>('POST', '/v1/users/alice/read', { conv: 'big', seq: 8, gen: 0 })).toMatchObject({ changed: false });
  });

  it('never below the head when the user joined: what came before the join was never theirs to read', async () => {
    const s = await start();
    await s.members('team', { add: ['carol'] });
    await s.post([31, 32, 33].map((seq) => ({ conv: 'team', seq, sender: 'bob' })));
    await s.ok('POST', '/v1/users/carol/read', { conv: 'team', seq: 33 });
    const after = await s.ok<ChangeReply>('POST', '/v1/users/carol/conversations/team/unread-from', { seq: 10 });
    expect(after.state).toMatchObject({ readSeq: 30, readGen: 1 });
    expect((await s.unread('carol')).conversations.find((c) => c.conv === 'team')).toMatchObject({ unread: 3 });
  });

  it('bad input is refused and changes nothing: seq < 1, above the head, a bad gen; an unknown conversation is 404, a user outside it 403', async () => {
    const s = await start();
    for (const body of [{ seq: 0 }, { seq: -1 }, { seq: 'x' }, { seq: 3, gen: 0 }, { seq: 3, extra: true }, { seq: 31 }]) {
      const bad = await s.api<{ error: { code: string } }>('POST', '/v1/users/alice/conversations/team/unread-from', body);
      expect([bad.status, bad.body.error.code], JSON.stringify(body)).toEqual([400, 'invalid_request']);
    }
    expect((await s.api<{ error: { code: string } }>('POST', '/v1/users/alice/conversations/nope/unread-from', { seq: 1 })).body.error.code).toBe(
      'unknown_conversation',
    );
    const outsider = await s.api<{ error: { code: string } }>('POST', '/v1/users/carol/conversations/team/unread-from', { seq: 1 });
    expect([outsider.status, outsider.body.error.code]).toEqual([403, 'not_a_member']);
    // Another user's token may not act for alice.
    expect((await s.request('POST', '/v1/users/alice/conversations/team/unread-from', { auth: { user: 'bob' }, body: { seq: 1 } })).status).toBe(403);
    const ws = await s.client('alice');
    await ws.sync();
    expect(await ws.request({ t: 'unread-from', conv: 'team', seq: 0 })).toMatchObject({ t: 'error', code: 'invalid_request' });
    expect(await teamOf(s)).toMatchObject({ readSeq: 5, unread: 25 });
    // Her own token may.
    const own = await s.request('POST', '/v1/users/alice/conversations/team/unread-from', { auth: { user: 'alice' }, body: { seq: 4 } });
    expect(own.status).toBe(200);
    expect(await teamOf(s)).toMatchObject({ readSeq: 3, unread: 27, mentions: 3 });
  });
});

describe('unread from here across server processes on one Redis', () => {
  const startServer = serversPerTest('redis');

  it('marked through one process, the device on the other gets readSeq going down; a read made before it, sent to the other process, is ignored', async () => {
    const one = await startServer({ redisPrefix: 'shared-uf' });
    const two = await startServer({ redisPrefix: 'shared-uf' });
    await one.members('pair', { add: ['alice', 'bob'] });
    await one.post(Array.from({ length: 5 }, (_, i) => ({ conv: 'pair', seq: i + 1, sender: 'bob' })));
    await two.ok('POST', '/v1/users/alice/read', { conv: 'pair', seq: 5, gen: 0 });
    const device = await two.client('alice');
    await device.sync();
    const mark = device.mark();
    const marked = await one.ok<ChangeReply>('POST', '/v1/users/alice/conversations/pair/unread-from', { seq: 2, gen: 1 });
    const change = await device.waitFrame((f) => f.t === 'change' && f.conv === 'pair', { since: mark, label: 'the unread-from from the other process' });
    expect(change).toMatchObject({ v: marked.version, epoch: marked.epoch, state: { readSeq: 1, readGen: 1 } });
    expect(await two.ok<ChangeReply>('POST', '/v1/users/alice/read', { conv: 'pair', seq: 5, gen: 0 })).toMatchObject({
      changed: false,
      state: { readSeq: 1 },
    });
    expect((await one.unread('alice')).total).toBe(4);
  });
});
