import { afterEach, describe, expect, it } from 'vitest';
import type { ConvState } from '../../protocol/types.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer, type TestServerOptions } from '../helpers/test-server.js';

interface ChangeReply {
  changed: boolean;
  epoch: string;
  version: number;
  state: ConvState;
}

/**
 * MAX_READ_AHEAD (a read far above the head is capped, counted and logged) and the operator's
 * reset-read (PUT /v1/users/:uid/conversations/:conv/read), on both engines: a buggy client's
 * read of seq 999 at head 2 must not silence the conversation for good.
 */
describe.each(['memory', 'redis'] as const)('reads that overshoot (%s)', (engine) => {
  const redis = fileFixture('redis-server', () => startRedisServer());
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const start = async (options: TestServerOptions = {}): Promise<TestServer> => {
    const s = await startTestServer({ engine, ...(engine === 'redis' ? { redis: redis() } : {}), ...options });
    servers.push(s);
    await s.members('ops', { add: ['alice', 'bob'] });
    await s.post([
      { conv: 'ops', seq: 1, sender: 'bob' },
      { conv: 'ops', seq: 2, sender: 'bob' },
    ]);
    return s;
  };
  const metric = async (s: TestServer, name: string): Promise<string | undefined> =>
    (await s.request('GET', '/metrics', { auth: 'none' })).text.split('\n').find((l) => l.startsWith(name));
  const opsOf = async (s: TestServer, uid: string) => (await s.unread(uid)).conversations.find((c) => c.conv === 'ops');

  it('a read more than MAX_READ_AHEAD above the head is capped at head + MAX_READ_AHEAD, counted, and later messages count', async () => {
    const s = await start({ config: { maxReadAhead: 10 } });
    const reply = await s.ok<ChangeReply>('POST', '/v1/users/alice/read', { conv: 'ops', seq: 999 });
    expect(reply.state.readSeq).toBe(12);
    expect(await metric(s, 'redpoint_reads_capped_total')).toBe('redpoint_reads_capped_total 1');
    await s.post({ conv: 'ops', seq: 13, sender: 'bob' });
    expect(await opsOf(s, 'alice')).toMatchObject({ lastSeq: 13, readSeq: 12, unread: 1 });
    // Within the bound a read is taken as is: it may overtake the ingest of what it reads.
    expect((await s.ok<ChangeReply>('POST', '/v1/users/alice/read', { conv: 'ops', seq: 20 })).state.readSeq).toBe(20);
    expect(await metric(s, 'redpoint_reads_capped_total')).toBe('redpoint_reads_capped_total 1');
  });

  it('the default bound is 1,000 above the head, and a WebSocket read batch is capped the same way', async () => {
    const s = await start();
    expect((await s.ok<ChangeReply>('POST', '/v1/users/alice/read', { conv: 'ops', seq: 5000 })).state.readSeq).toBe(1002);
    const ws = await s.client('bob');
    await ws.sync();
    const ack = await ws.read([['ops', 1_000_000]]);
    expect(ack.t).toBe('ack');
    expect((await opsOf(s, 'bob'))?.readSeq).toBe(1002);
    expect(await metric(s, 'redpoint_reads_capped_total')).toBe('redpoint_reads_capped_total 2');
  });

  it('MAX_READ_AHEAD=0 turns the cap off', async () => {
    const s = await start({ config: { maxReadAhead: 0 } });
    expect((await s.ok<ChangeReply>('POST', '/v1/users/alice/read', { conv: 'ops', seq: 999_999 })).state.readSeq).toBe(999_999);
  });

  it('reset-read lowers the read position (to the head by default); connected devices get it as a change; later messages count', async () => {
    const s = await start();
    await s.ok('POST', '/v1/users/alice/read', { conv: 'ops', seq: 999 });
    await s.post({ conv: 'ops', seq: 3, sender: 'bob' });
    expect(await opsOf(s, 'alice')).toMatchObject({ readSeq: 999, unread: 0 });
    const device = await s.client('alice');
    await device.sync();
    const mark = device.mark();

    const reset = await s.ok<ChangeReply>('PUT', '/v1/users/alice/conversations/ops/read', {});
    expect(reset).toMatchObject({ changed: true, state: { conv: 'ops', lastSeq: 3, readSeq: 3 } });
    await device.waitFrame((f) => f.t === 'change' && f.conv === 'ops' && f.state?.readSeq === 3, { since: mark, label: 'the reset as a change' });
    // A retry (the reply was lost) changes nothing more.
    expect(await s.ok<ChangeReply>('PUT', '/v1/users/alice/conversations/ops/read', {})).toMatchObject({ changed: false, version: reset.version });

    await s.post({ conv: 'ops', seq: 4, sender: 'bob' });
    expect(await opsOf(s, 'alice')).toMatchObject({ lastSeq: 4, readSeq: 3, unread: 1 });
    expect((await s.unread('alice')).total).toBe(1);
    // An explicit seq lowers further (those messages are unread again); a higher one never raises.
    expect((await s.ok<ChangeReply>('PUT', '/v1/users/alice/conversations/ops/read', { seq: 1 })).state).toMatchObject({ readSeq: 1 });
    expect((await s.unread('alice')).total).toBe(3);
    expect(await s.ok<ChangeReply>('PUT', '/v1/users/alice/conversations/ops/read', { seq: 4 })).toMatchObject({ changed: false, state: { readSeq: 1 } });
    expect(await metric(s, 'redpoint_read_resets_total{outcome="lowered"}')).toBe('redpoint_read_resets_total{outcome="lowered"} 2');
    expect(await metric(s, 'redpoint_read_resets_total{outcome="unchanged"}')).toBe('redpoint_read_resets_total{outcome="unchanged"} 2');
  });

  it('reset-read is for operators: a user token gets 401; bad input is refused and changes nothing; an unknown conversation is 404, a user outside it 403', async () => {
    const s = await start();
    await s.ok('POST', '/v1/users/alice/read', { conv: 'ops', seq: 2 });
    const asAlice = await s.request('PUT', '/v1/users/alice/conversations/ops/read', { auth: { user: 'alice' }, body: {} });
    expect(asAlice.status).toBe(401);
    for (const body of [{ seq: -1 }, { seq: 'x' }, { seq: 1, extra: true }]) {
      const bad = await s.api<{ error: { code: string; message: string } }>('PUT', '/v1/users/alice/conversations/ops/read', body);
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe('invalid_request');
    }
    expect((await s.api('PUT', '/v1/users/alice/conversations/nope/read', {})).status).toBe(404);
    const outsider = await s.api<{ error: { code: string } }>('PUT', '/v1/users/carol/conversations/ops/read', { seq: 0 });
    expect([outsider.status, outsider.body.error.code]).toEqual([403, 'not_a_member']);
    expect((await opsOf(s, 'alice'))?.readSeq).toBe(2);
  });

  it('a deleted conversation stays read up to where it was deleted', async () => {
    const s = await start();
    await s.ok('DELETE', '/v1/users/alice/conversations/ops');
    const reset = await s.ok<ChangeReply>('PUT', '/v1/users/alice/conversations/ops/read', { seq: 0 });
    expect(reset).toMatchObject({ changed: false, state: { readSeq: 2, deletedSeq: 2 } });
    await s.post({ conv: 'ops', seq: 3, sender: 'bob' });
    expect(await opsOf(s, 'alice')).toMatchObject({ unread: 1 });
  });
});

describe('reset-read across server processes on one Redis', () => {
  const redis = fileFixture('redis-server', () => startRedisServer());
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });

  it('a reset on one process reaches a device connected to another as the next change', async () => {
    const one = await startTestServer({ engine: 'redis', redis: redis(), redisPrefix: 'shared' });
    const two = await startTestServer({ engine: 'redis', redis: redis(), redisPrefix: 'shared' });
    servers.push(one, two);
    await one.members('ops', { add: ['alice', 'bob'] });
    await one.post({ conv: 'ops', seq: 2, sender: 'bob' });
    await two.ok('POST', '/v1/users/alice/read', { conv: 'ops', seq: 900 });
    const device = await two.client('alice');
    await device.sync();
    const mark = device.mark();
    const reset = await one.ok<ChangeReply>('PUT', '/v1/users/alice/conversations/ops/read', {});
    const change = await device.waitFrame((f) => f.t === 'change' && f.conv === 'ops', { since: mark, label: 'the reset from the other process' });
    expect(change).toMatchObject({ v: reset.version, epoch: reset.epoch, state: { readSeq: 2 } });
  });
});
