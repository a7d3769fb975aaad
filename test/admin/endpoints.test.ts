import { afterEach, describe, expect, it } from 'vitest';
import type { MemoryUser } from '../../server/engine/memory/memory-state.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/** The operator endpoints of PROTOCOL.md over HTTP, the seq guard, and the periodic reconcile. */
describe('operator endpoints', () => {
  const redis = fileFixture('redis-server', () => startRedisServer());
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const start = async (config: Parameters<typeof startTestServer>[0] = {}): Promise<TestServer> => {
    const s = await startTestServer(config);
    servers.push(s);
    await s.members('team', { add: ['ann', 'ben'] });
    await s.members('big', { add: ['ann', 'ben', 'cat', 'dan'] });
    await s.post([
      { conv: 'team', seq: 1, sender: 'ben' },
      { conv: 'big', seq: 1, sender: 'ben' },
    ]);
    return s;
  };
  const metric = async (s: TestServer, line: string): Promise<string | undefined> =>
    (await s.request('GET', '/metrics', { auth: 'none' })).text.split('\n').find((l) => l.startsWith(line));

  it('PUT /v1/conversations/:conv/head and PUT /v1/heads re-assert heads (API key only)', async () => {
    const s = await start();
    expect(await s.ok('PUT', '/v1/conversations/team/head', { maxSeq: 4 })).toEqual({ conv: 'team', maxSeq: 4 });
    expect((await s.unread('ann')).conversations.find((c) => c.conv === 'team')).toMatchObject({ lastSeq: 4, unread: 4 });
    expect(await s.ok('PUT', '/v1/conversations/team/head', { maxSeq: 2 })).toEqual({ conv: 'team', maxSeq: 4 });
    expect((await s.api('PUT', '/v1/conversations/nope/head', { maxSeq: 2 })).status).toBe(404);
    expect((await s.api('PUT', '/v1/conversations/team/head', { maxSeq: 0 })).status).toBe(400);
    expect((await s.request('PUT', '/v1/conversations/team/head', { auth: 'none', body: { maxSeq: 5 } })).status).toBe(401);
    expect((await s.request('PUT', '/v1/conversations/team/head', { auth: { user: 'ann' }, body: { maxSeq: 5 } })).status).toBe(401);
    expect(
      await s.ok('PUT', '/v1/heads', {
        heads: [
          { conv: 'big', maxSeq: 7 },
          { conv: 'gone', maxSeq: 1 },
        ],
      }),
    ).toEqual({ heads: [{ conv: 'big', maxSeq: 7 }], unknown: ['gone'] });
    expect((await s.unread('cat')).total).toBe(7);
  });

  it('DELETE /v1/conversations/:conv deletes for all; a retry gets 404; DELETE /v1/users/:uid erases', async () => {
    const s = await start();
    expect(await s.ok('DELETE', '/v1/conversations/team')).toMatchObject({ conv: 'team', members: 2 });
    expect((await s.api('DELETE', '/v1/conversations/team')).status).toBe(404);
    expect((await s.api('POST', '/v1/messages', { conv: 'team', seq: 2, sender: 'ben' })).status).toBe(404);
    expect((await s.unread('ann')).conversations.map((c) => c.conv)).toEqual(['big']);
    expect(await s.ok('DELETE', '/v1/users/ann?scan=1')).toEqual({ uid: 'ann', conversations: ['big'], foundByScan: [] });
    expect((await s.unread('ann')).conversations).toEqual([]);
    expect(await s.ok('GET', '/v1/admin/users/ann/traces')).toEqual({ state: false, listedIn: [] });
    expect((await s.request('DELETE', '/v1/users/ben', { auth: { user: 'ben' } })).status).toBe(401);
  });

  it('MAX_SEQ_JUMP refuses a seq far above the head with 422 seq_jump, nothing applied, and counts it', async () => {
    const s = await start({ config: { maxSeqJump: 1000 } });
    const refused = await s.api<{ error: { code: string; message: string } }>('POST', '/v1/messages', {
      messages: [
        { conv: 'team', seq: 2, sender: 'ben' },
        { conv: 'team', seq: 1_700_000_000, sender: 'ben' },
      ],
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('seq_jump');
    expect(refused.body.error.message).toContain('1699999999 above its head 1');
    // team 1 and big 1, as before the refused request.
    expect((await s.unread('ann')).total).toBe(2);
    expect((await s.api('PUT', '/v1/conversations/team/head', { maxSeq: 5000 })).status).toBe(422);
    await s.post({ conv: 'team', seq: 900, sender: 'ben' });
    expect(await metric(s, 'redpoint_seq_jumps_total{action="refused"}')).toBe('redpoint_seq_jumps_total{action="refused"} 2');
  });

  it('SEQ_JUMP_ACTION=warn counts and applies', async () => {
    const s = await start({ config: { maxSeqJump: 10, seqJumpAction: 'warn' } });
    await s.post({ conv: 'team', seq: 50, sender: 'cat' });
    expect((await s.unread('ann')).conversations.find((c) => c.conv === 'team')?.unread).toBe(50);
    expect(await metric(s, 'redpoint_seq_jumps_total{action="warned"}')).toBe('redpoint_seq_jumps_total{action="warned"} 1');
  });

  it('RECONCILE_EVERY runs the reconcile job in the server: it repairs, counts in redpoint_reconcile_* and logs', async () => {
    const s = await start({ config: { reconcileEverySeconds: 3600, reconcileRate: 10_000 } });
    const job = s.server.reconcileJob;
    if (!job) throw new Error('no reconcile job');
    const users = (s.engine as unknown as { users: Map<string, MemoryUser> }).users;
    const ann = users.get('ann');
    if (!ann) throw new Error('no ann');
    ann.total = 42;
    await job.walk();
    expect((await s.unread('ann')).total).toBe(1 + 1);
    expect(await metric(s, 'redpoint_reconcile_repaired_total{kind="totals"}')).toBe('redpoint_reconcile_repaired_total{kind="totals"} 1');
    expect(await metric(s, 'redpoint_reconcile_checked_total{subject="users"}')).toMatch(/ [1-9]\d*$/);
    expect(await metric(s, 'redpoint_reconcile_runs_total')).toMatch(/ [1-9]\d*$/);
  }, 30_000);

  it('POST /v1/admin/reconcile takes one target: users and conversations together is 400, and the key name is counted', async () => {
    const s = await start();
    const both = await s.api<{ error: { code: string } }>('POST', '/v1/admin/reconcile', {
      users: ['ann'],
      conversations: ['team'],
      repair: false,
      graceMs: 0,
    });
    expect(both.status).toBe(400);
    expect(both.body.error.code).toBe('invalid_request');
    const idsAndWalk = await s.api('POST', '/v1/admin/reconcile', { users: ['ann'], cursor: '', repair: false, graceMs: 0 });
    expect(idsAndWalk.status).toBe(400);
    expect(await s.ok('POST', '/v1/admin/reconcile', { users: ['ann'], repair: false, graceMs: 0 })).toMatchObject({ findings: [] });
    expect(await metric(s, 'redpoint_api_key_requests_total{key="default"}')).toMatch(/ [1-9]\d*$/);
  });

  it('a reconcile walk cursor the Redis engine cannot read is 400, not 500', async () => {
    const s = await start({ engine: 'redis', redis: redis() });
    const bad = await s.api<{ error: { code: string } }>('POST', '/v1/admin/reconcile', { cursor: 'u:abc', repair: false, graceMs: 0 });
    expect(bad.status, JSON.stringify(bad.body)).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
  });
});
