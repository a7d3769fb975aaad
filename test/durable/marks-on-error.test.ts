import { describe, expect, it } from 'vitest';
import { userKeys } from '../../server/engine/redis/keys.js';
import { durableStack } from './stack.js';

/**
 * A user step marks what it changes for PostgreSQL in the same call (lib/user.lua markDirty); the
 * marks of all the users of a call are written together after the last one. A script is not rolled
 * back: when a later user's ops raise an error, the users applied before it keep their changes,
 * so their marks must be written all the same, or Redis would hold changes no drain ever writes.
 */
describe('durable tier: marks of a call whose later user fails', () => {
  const stack = durableStack('markserror', [{ durable: { run: false }, redisPrefix: 'me' }]);

  it('the users applied before the error keep their changes and their marks', async () => {
    const store = stack.server.engine.durableStore?.();
    const durable = stack.server.durable;
    if (!store || !durable) throw new Error('no durable tier');
    await stack.server.members('mec1', { add: ['mea', 'meb'] });
    await stack.server.members('mec2', { add: ['mex', 'mey'] });
    await stack.server.post([
      { conv: 'mec1', seq: 3, sender: 'meb' },
      { conv: 'mec2', seq: 3, sender: 'mex' },
    ]);
    await durable.persister.drainAll(Date.now() + 20_000);
    expect((await store.inspectUser('mea')).marked.size).toBe(0);
    // A record no script can decode: the second user's op fails in the middle of the call.
    await stack.admin.hset(userKeys('me', 'mey').records, 'mec2', 'not a record');

    await expect(
      stack.server.engine.applyUserOps([
        { type: 'read', uid: 'mea', conv: 'mec1', seq: 2 },
        { type: 'read', uid: 'mey', conv: 'mec2', seq: 2 },
      ]),
    ).rejects.toThrow(/malformed record/);

    const applied = await store.inspectUser('mea');
    expect(applied.records.get('mec1')).toMatch(/^1000\|3\|2\|/);
    expect([...applied.marked]).toEqual(['mec1']);
    await durable.persister.drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ read_seq: string }>("SELECT read_seq FROM redpoint_user_conv WHERE uid = 'mea' AND conv = 'mec1'");
    expect(rows.map((r) => Number(r.read_seq))).toEqual([2]);
  });
});
