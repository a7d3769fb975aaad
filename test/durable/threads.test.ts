import { describe, expect, it } from 'vitest';
import { durableStack } from './stack.js';

/**
 * Threads (PROTOCOL.md "Threads") in the durable tier: a thread is a child conversation and its
 * rows persist like any conversation's, with no registry of their own to restore. What a row
 * stores relative to the thread's default level (rules.ts storedLevel: `mentions` by default,
 * `all` set apart from it) must come back from PostgreSQL as it was, and the follows with it:
 * after Redis lost everything, a leave still unfollows, and a follow is still counted.
 */
describe('durable tier: threads', () => {
  const stack = durableStack('threads', [{ redisPrefix: 'th', durable: { coldAfterSeconds: 1, run: false } }]);
  const drain = () => stack.server.durable?.persister.drainAll(Date.now() + 20_000);

  it('Redis loses everything: thread rows come back with their levels; a leave then unfollows', async () => {
    await stack.server.members('rt-1', { add: ['ra', 'rb', 'rc'], category: 'work' });
    await stack.server.post({ conv: 'rt-1', seq: 1, sender: 'ra' });
    await stack.server.post([
      { conv: 'rt-1', thread: 1, rootSender: 'ra', seq: 1, sender: 'rb', mentions: ['rc'] },
      { conv: 'rt-1', thread: 1, seq: 2, sender: 'rb' },
    ]);
    // rc keeps the default (mentions); ra sets all.
    expect((await stack.server.api('PUT', `/v1/users/ra/conversations/${encodeURIComponent('rt-1#r:1')}`, { level: 'all' })).status).toBe(200);
    const before = { ra: await stack.server.unread('ra'), rc: await stack.server.unread('rc') };
    expect(before.ra).toMatchObject({ total: 2, mentions: 0 });
    expect(before.rc).toMatchObject({ total: 2, mentions: 1 });
    await drain();
    await stack.admin.flushall();

    const after = { ra: await stack.server.unread('ra'), rc: await stack.server.unread('rc') };
    expect(after.ra).toMatchObject({ total: before.ra.total, mentions: before.ra.mentions, conversations: before.ra.conversations });
    expect(after.rc).toMatchObject({ total: before.rc.total, mentions: before.rc.mentions, conversations: before.rc.conversations });
    expect(after.rc.conversations.find((c) => c.conv === 'rt-1#r:1')).toMatchObject({ level: 'mentions', category: 'work', unread: 2, mentions: 1 });

    await stack.server.members('rt-1', { remove: ['rc'] });
    expect((await stack.server.unread('rc')).conversations).toEqual([]);
    await stack.server.post({ conv: 'rt-1', thread: 1, seq: 3, sender: 'rb' });
    expect((await stack.server.unread('ra')).conversations.find((c) => c.conv === 'rt-1#r:1')).toMatchObject({ unread: 3 });
  });
});
