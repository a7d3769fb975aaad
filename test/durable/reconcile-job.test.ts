import { describe, expect, it } from 'vitest';
import { durableStack } from './stack.js';

/** RECONCILE_EVERY with the durable tier: the job walks Redis against PostgreSQL too, and repairs. */
describe('durable tier: the periodic reconcile job includes the database', () => {
  const stack = durableStack('job', [{ redisPrefix: 'j', durable: { run: false }, config: { reconcileEverySeconds: 3600, reconcileRate: 10_000 } }]);

  it('a record whose dirty mark was lost reaches PostgreSQL after one walk, counted in redpoint_reconcile_repaired_total', async () => {
    const job = stack.server.server.reconcileJob;
    if (!job) throw new Error('no reconcile job');
    await stack.server.members('jobconv', { add: ['ja', 'jb'] });
    await stack.server.post([1, 2, 3].map((seq) => ({ conv: 'jobconv', seq, sender: 'ja' })));
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.server.ok('POST', '/v1/users/jb/read', { conv: 'jobconv', seq: 2 });
    expect(await stack.admin.zrem('j:d', 'jb|jobconv')).toBe(1);

    await job.walk();
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query("SELECT read_seq FROM redpoint_user_conv WHERE uid = 'jb' AND conv = 'jobconv'");
    expect(rows[0]?.read_seq).toBe('2');
    const metrics = (await stack.server.request('GET', '/metrics', { auth: 'none' })).text;
    expect(metrics).toMatch(/^redpoint_reconcile_repaired_total\{kind="db-behind"\} 1$/m);
  }, 60_000);

  it('a conversation gone from Redis (cold-evicted, lost) while a member is there: the walk restores it, the membership stays', async () => {
    const job = stack.server.server.reconcileJob;
    if (!job) throw new Error('no reconcile job');
    await stack.server.members('goneconv', { add: ['ga', 'gb'] });
    await stack.server.post([1, 2].map((seq) => ({ conv: 'goneconv', seq, sender: 'ga' })));
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const before = await stack.server.unread('gb');
    // The conversation leaves Redis, its members stay (an eviction after which gb came back).
    expect(await stack.admin.del('j:{c:goneconv}')).toBe(1);

    await job.walk();
    const after = await stack.server.unread('gb');
    expect(after.conversations.find((c) => c.conv === 'goneconv')).toEqual(before.conversations.find((c) => c.conv === 'goneconv'));
    expect(await stack.admin.exists('j:{c:goneconv}')).toBe(1);
    const metrics = (await stack.server.request('GET', '/metrics', { auth: 'none' })).text;
    expect(metrics).not.toMatch(/redpoint_reconcile_(found|repaired)_total\{kind="stale-member"\}/);
  }, 60_000);
});
