import { afterEach, describe, expect, it } from 'vitest';
import { encodeMsgpack } from '../../protocol/codec.js';
import type { PullReply } from '../../protocol/types.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, TEST_API_KEY, type TestServer } from '../helpers/test-server.js';

/**
 * The per-user setting `mutedMentions` (issue 43, PROTOCOL.md "Notification levels"): off (the
 * default), a muted conversation adds nothing to the badge; on, it adds its unread mentions as a
 * level-`mentions` one does. On both engines, over HTTP: the badge follows each flip, both ways,
 * for write- and read-diffused conversations, and another device learns the flip by pulling.
 */
describe.each(['memory', 'redis'] as const)('mutedMentions (%s)', (engine) => {
  const redis = fileFixture('redis-server', () => startRedisServer());
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const start = async (): Promise<TestServer> => {
    const s = await startTestServer({ engine, largeGroupThreshold: 3, ...(engine === 'redis' ? { redis: redis() } : {}) });
    servers.push(s);
    return s;
  };
  const badge = async (s: TestServer, uid: string) => {
    const u = await s.unread(uid);
    return { total: u.total, mentions: u.mentions, categories: u.categories, mutedMentions: u.mutedMentions };
  };
  const pull = async (s: TestServer, uid: string, since?: string): Promise<PullReply> => {
    const r = await s.asUser<PullReply>(uid, 'GET', `/v1/sync${since ? `?since=${since}` : ''}`);
    expect(r.status).toBe(200);
    return r.body;
  };

  it('a mention in a muted conversation counts after PUT mutedMentions true, not before, not after false', async () => {
    const s = await start();
    await s.members('dm', { add: ['alice', 'bob'], category: 'work' });
    await s.members('big', { add: ['alice', 'bob', 'c', 'd', 'e'] });
    await s.ok('PUT', '/v1/users/alice/conversations/dm', { level: 'none' });
    await s.ok('PUT', '/v1/users/alice/conversations/big', { muted: true });
    await s.post([
      { conv: 'dm', seq: 1, sender: 'bob' },
      { conv: 'dm', seq: 2, sender: 'bob', mentions: ['alice'] },
      { conv: 'big', seq: 1, sender: 'bob', mentions: ['alice'] },
      { conv: 'big', seq: 2, sender: 'bob' },
    ]);
    const off = { total: 0, mentions: 0, categories: {} };
    expect(await badge(s, 'alice')).toEqual(off);
    expect(await s.ok('GET', '/v1/users/alice/settings')).toEqual({ uid: 'alice', shareReads: true, mutedMentions: false });

    expect(await s.ok('PUT', '/v1/users/alice/settings', { mutedMentions: true })).toEqual({ uid: 'alice', shareReads: true, mutedMentions: true });
    expect(await s.ok('GET', '/v1/users/alice/settings')).toEqual({ uid: 'alice', shareReads: true, mutedMentions: true });
    const on = { total: 2, mentions: 2, categories: { work: 1, default: 1 }, mutedMentions: true };
    expect(await badge(s, 'alice')).toEqual(on);
    // Idempotent: the same value again changes no figure.
    await s.ok('PUT', '/v1/users/alice/settings', { mutedMentions: true });
    expect(await badge(s, 'alice')).toEqual(on);
    // Reading the mention takes it off the badge; bob's badge never depended on alice's flag.
    await s.ok('POST', '/v1/users/alice/read', { conv: 'dm', seq: 2 });
    expect(await badge(s, 'alice')).toEqual({ ...on, total: 1, mentions: 1, categories: { default: 1 } });
    await s.ok('PUT', '/v1/users/alice/settings', { mutedMentions: false, shareReads: true });
    expect(await badge(s, 'alice')).toEqual(off);
  });

  it('another device learns the flip by pulling: the version moves and the reply carries the setting', async () => {
    const s = await start();
    await s.members('dm', { add: ['alice', 'bob'] });
    await s.ok('PUT', '/v1/users/alice/conversations/dm', { level: 'none' });
    await s.post({ conv: 'dm', seq: 1, sender: 'bob', mentions: ['alice'] });
    const first = await pull(s, 'alice');
    expect(first.mutedMentions).toBeUndefined();
    await s.ok('PUT', '/v1/users/alice/settings', { mutedMentions: true });
    const second = await pull(s, 'alice', `${first.epoch}:${first.version}`);
    expect(second.mutedMentions).toBe(true);
    expect(second.epoch !== first.epoch || second.version > first.version).toBe(true);
    await s.ok('PUT', '/v1/users/alice/settings', { mutedMentions: false });
    const third = await pull(s, 'alice', `${second.epoch}:${second.version}`);
    expect(third.mutedMentions).toBeUndefined();
    expect(third.epoch !== second.epoch || third.version > second.version).toBe(true);
  });

  it('bad settings bodies are refused and change nothing', async () => {
    const s = await start();
    expect((await s.api('PUT', '/v1/users/a/settings', { mutedMentions: 'yes' })).status).toBe(400);
    expect((await s.api('PUT', '/v1/users/a/settings', {})).status).toBe(400);
    // MessagePack carries a key whose value is undefined (msgpackr's encoding of an unset field):
    // present for the schema, yet nothing to change.
    const unset = await fetch(`${s.url}/v1/users/a/settings`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/msgpack', accept: 'application/json' },
      body: encodeMsgpack({ mutedMentions: undefined }),
    });
    expect(unset.status).toBe(400);
    expect(await unset.text()).toMatch(/nothing to change/);
    expect(await s.ok('GET', '/v1/users/a/settings')).toEqual({ uid: 'a', shareReads: true, mutedMentions: false });
  });
});
