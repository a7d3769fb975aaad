import { describe, expect, it } from 'vitest';
import { durableStack } from './stack.js';

/**
 * deletedSeq is a max-register within one membership only: a new join starts it over (-1), so a
 * conversation the user deleted, left and joined again shows again. PostgreSQL must keep that:
 * merging deleted_seq with GREATEST across memberships kept the old deletion, and after Redis
 * lost the user the rejoined conversation came back hidden (the durable property test's seed
 * -1326661010, path 226).
 */
describe('durable tier: a conversation deleted, left and joined again', () => {
  const stack = durableStack('rejoin', [{ redisPrefix: 'rp', durable: { run: false } }]);

  const drain = async (): Promise<void> => {
    const durable = stack.server.durable;
    if (!durable) throw new Error('no durable tier');
    await durable.persister.drainAll(Date.now() + 20_000);
  };

  for (const messagesAfterRejoin of [0, 2]) {
    it(`shows again after Redis is lost (${messagesAfterRejoin} messages after the rejoin)`, async () => {
      const conv = `rejoin-${messagesAfterRejoin}`;
      await stack.server.members(conv, { add: ['ja', 'jb'] });
      await stack.server.post({ conv, seq: 1, sender: 'ja' });
      await stack.server.ok('DELETE', `/v1/users/jb/conversations/${conv}`);
      // Each step drained, so PostgreSQL merges every state the record went through.
      await drain();
      await stack.server.members(conv, { remove: ['jb'] });
      await drain();
      await stack.server.members(conv, { add: ['jb'] });
      for (let seq = 2; seq < 2 + messagesAfterRejoin; seq++) await stack.server.post({ conv, seq, sender: 'ja' });
      await drain();
      const before = (await stack.server.unread('jb')).conversations.find((c) => c.conv === conv);
      expect(before).toMatchObject({ lastSeq: 1 + messagesAfterRejoin, unread: messagesAfterRejoin });

      await stack.admin.flushall();
      const after = (await stack.server.unread('jb')).conversations.find((c) => c.conv === conv);
      expect(after).toEqual(before);
      const [row] = (await stack.sql.query('SELECT deleted_seq FROM redpoint_user_conv WHERE uid = $1 AND conv = $2', ['jb', conv])).rows;
      expect(Number(row.deleted_seq)).toBe(-1);
    });
  }

  it('a restore merging a record Redis kept without its user (the rejoin) with the old membership in PostgreSQL keeps it shown', async () => {
    const conv = 'rejoin-kept';
    await stack.server.members(conv, { add: ['ka', 'kb'] });
    await stack.server.post({ conv, seq: 1, sender: 'ka' });
    await stack.server.ok('DELETE', `/v1/users/kb/conversations/${conv}`);
    await stack.server.members(conv, { remove: ['kb'] });
    await drain();
    // The rejoin is in Redis only (not drained) when the user's meta is lost and its record kept.
    await stack.server.members(conv, { add: ['kb'] });
    const kept = await stack.admin.hget('rp:{u:kb}:c', conv);
    const before = (await stack.server.unread('kb')).conversations.find((c) => c.conv === conv);
    expect(before).toMatchObject({ lastSeq: 1, unread: 0 });
    await stack.admin.flushall();
    await stack.admin.hset('rp:{u:kb}:c', conv, kept ?? '');
    expect((await stack.server.unread('kb')).conversations.find((c) => c.conv === conv)).toEqual(before);
  });
});
