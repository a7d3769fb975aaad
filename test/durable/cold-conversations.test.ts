import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import { counts, durableStack } from './stack.js';

/**
 * Conversations leave Redis with their cold members: once no member is left in Redis and
 * PostgreSQL holds exactly the conversation's head and roster, the cold sweep removes it (no key
 * naming it remains), and its next touch — a message, a membership change — restores it.
 */
describe('durable tier: conversations whose members are all cold leave Redis', () => {
  const stack = durableStack('coldconv', [{ redisPrefix: 'k', durable: { coldAfterSeconds: 1, run: false } }]);
  const silent = pino({ level: 'silent' });

  const tier = () => {
    const durable = stack.server.durable;
    const store = stack.server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    return { durable, store, sweep: new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, silent, stack.server.server.metrics) };
  };
  const convKeyExists = async (conv: string): Promise<boolean> => (await stack.admin.exists(`k:{c:${conv}}`)) === 1;
  const drain = () => tier().durable.persister.drainAll(Date.now() + 20_000);
  const later = () => Date.now() + 3_600_000;

  it('all members cold: the conversation goes, and a message to it is applied after restoring it', async () => {
    await stack.server.members('cc-1', { add: ['qa', 'qb'], category: 'work' });
    await stack.server.post([
      { conv: 'cc-1', seq: 1, sender: 'qa' },
      { conv: 'cc-1', seq: 2, sender: 'qa', mentions: ['qb'] },
    ]);
    await drain();
    const before = await stack.server.unread('qb');
    const { sweep } = tier();
    expect(await sweep.sweepOnce(later())).toBeGreaterThanOrEqual(2);
    expect(await convKeyExists('cc-1')).toBe(false);
    expect((await stack.admin.keys('k:*')).filter((k) => k.includes('cc-1'))).toEqual([]);
    expect(await stack.admin.zscore('k:ez', '#cc-1')).toMatch(/^[1-9][0-9]{15}$/);

    await stack.server.post({ conv: 'cc-1', seq: 3, sender: 'qa' });
    expect(await convKeyExists('cc-1')).toBe(true);
    expect(await stack.admin.zscore('k:ez', '#cc-1')).toBeNull();
    const after = await stack.server.unread('qb');
    expect(after.conversations.find((c) => c.conv === 'cc-1')).toMatchObject({ lastSeq: 3, unread: 3, mentions: 1, category: 'work' });
    expect(after.total).toBe(before.total + 1);
    // The roster came back whole: a membership change after it keeps both members.
    await stack.server.members('cc-1', { add: ['qc'] });
    const roster = await stack.admin.hkeys('k:{c:cc-1}');
    expect(roster.filter((f) => !f.startsWith('#')).sort()).toEqual(['qa', 'qb', 'qc']);
  });

  it('kept while a member is in Redis, while a change waits for the drainer, or while PostgreSQL lacks it', async () => {
    await stack.server.members('cc-2', { add: ['wa', 'wb'] });
    await stack.server.members('cc-3', { add: ['wc', 'wd'] });
    await stack.server.post({ conv: 'cc-3', seq: 1, sender: 'wc' });
    await drain();
    // wb stays active; cc-3's head moves again after the drain (its mark waits).
    const { sweep, durable } = tier();
    await stack.server.post({ conv: 'cc-3', seq: 2, sender: 'wc' });
    await stack.admin.zadd('k:a', later() + 60_000, 'wb');
    await sweep.sweepOnce(later());
    expect(await convKeyExists('cc-2')).toBe(true);
    expect(await convKeyExists('cc-3')).toBe(true);
    // PostgreSQL behind on cc-3's head (its mark lost): still kept, it would come back older.
    expect(await stack.admin.zrem('k:dc', 'h|cc-3')).toBe(1);
    await stack.server.unread('wc');
    await durable.persister.drainAll(Date.now() + 20_000);
    await sweep.sweepOnce(later());
    expect(await convKeyExists('cc-3')).toBe(true);
    expect((await durable.tier.pg.conversationVersions(['cc-3'])).get('cc-3')?.maxSeq).toBe('1');
  });

  it('an eviction racing messages and membership changes: every message counts once, the roster is whole', async () => {
    await stack.server.members('cc-4', { add: ['ra', 'rb'] });
    await stack.server.post({ conv: 'cc-4', seq: 1, sender: 'ra' });
    await drain();
    const { sweep } = tier();
    for (let seq = 2; seq <= 8; seq++) {
      await Promise.all([
        sweep.sweepOnce(later()),
        stack.server.post({ conv: 'cc-4', seq, sender: 'ra' }),
        seq === 5 ? stack.server.members('cc-4', { add: ['rc'] }) : Promise.resolve(),
      ]);
      await drain();
    }
    await sweep.sweepOnce(later());
    const views = await Promise.all(['ra', 'rb', 'rc'].map((uid) => stack.server.unread(uid)));
    expect(views.map((v) => v.conversations.find((c) => c.conv === 'cc-4')?.lastSeq)).toEqual([8, 8, 8]);
    expect(views[1]?.conversations.find((c) => c.conv === 'cc-4')?.unread).toBe(8);
    // rc joined at the head of its join: what came before is not unread for it.
    const rc = views[2]?.conversations.find((c) => c.conv === 'cc-4');
    expect(rc?.unread).toBeLessThan(8);
    await stack.admin.flushall();
    const again = await Promise.all(['ra', 'rb', 'rc'].map((uid) => stack.server.unread(uid)));
    expect(again.map(counts)).toEqual(views.map(counts));
  });

  it('PostgreSQL down: an evicted conversation is not created anew by a message or a membership change (503, nothing applied)', async () => {
    // An intact store (the test before flushed it): what PostgreSQL down refuses is then only what the evicted set names.
    await tier().store.markIntact(true);
    await stack.server.members('cc-5', { add: ['pa', 'pb'] });
    await stack.server.post({ conv: 'cc-5', seq: 1, sender: 'pa' });
    await drain();
    await tier().sweep.sweepOnce(later());
    expect(await convKeyExists('cc-5')).toBe(false);
    await stack.postgres.kill();
    try {
      const members = await stack.server.api('PUT', '/v1/conversations/cc-5/members', { add: ['pc'] });
      expect(members.status).toBe(503);
      const message = await stack.server.api('POST', '/v1/messages', { conv: 'cc-5', seq: 2, sender: 'pa' });
      expect(message.status).toBe(503);
      expect(await convKeyExists('cc-5')).toBe(false);
      // A conversation never seen is created all the same: Redis keeps serving without PostgreSQL.
      await stack.server.members('cc-new', { add: ['pnew'] });
    } finally {
      await stack.postgres.start();
    }
    await stack.server.post({ conv: 'cc-5', seq: 2, sender: 'pa' });
    expect((await stack.server.unread('pb')).conversations.find((c) => c.conv === 'cc-5')).toMatchObject({ lastSeq: 2, unread: 2 });
  });

  it('deleting an evicted conversation for everyone deletes it (it does not come back from PostgreSQL)', async () => {
    await stack.server.members('cc-6', { add: ['da', 'db'] });
    await stack.server.post({ conv: 'cc-6', seq: 1, sender: 'da' });
    await drain();
    await tier().sweep.sweepOnce(later());
    expect(await convKeyExists('cc-6')).toBe(false);
    await stack.server.ok('DELETE', '/v1/conversations/cc-6');
    await drain();
    expect((await stack.server.unread('db')).conversations.find((c) => c.conv === 'cc-6')).toBeUndefined();
    const message = await stack.server.api('POST', '/v1/messages', { conv: 'cc-6', seq: 2, sender: 'da' });
    expect(message.status).toBe(404);
  });

  // PostgreSQL keeps no mention index (conv_record.lua ':m'): the restored conversation's index
  // floor is its head, so a recall of a seq from before reaches every member.
  it('a read-diffused group: a mention made before the eviction and recalled after the restore is dropped', async () => {
    await stack.server.members('cc-7', { add: ['ra', 'rb', 'rc', 'rd'] });
    await stack.server.post([
      { conv: 'cc-7', seq: 1, sender: 'ra', mentions: ['rb'] },
      { conv: 'cc-7', seq: 2, sender: 'ra' },
    ]);
    expect(await stack.admin.hget('k:{c:cc-7}', '#l')).toBe('1');
    expect((await stack.server.unread('rb')).conversations.find((c) => c.conv === 'cc-7')).toMatchObject({ unread: 2, mentions: 1 });
    await drain();
    await tier().sweep.sweepOnce(later());
    expect(await convKeyExists('cc-7')).toBe(false);
    await stack.server.post({ conv: 'cc-7', seq: 3, sender: 'ra', counts: false, recalls: [1] });
    expect(await convKeyExists('cc-7')).toBe(true);
    expect((await stack.server.unread('rb')).conversations.find((c) => c.conv === 'cc-7')).toMatchObject({ lastSeq: 3, unread: 1, mentions: 0 });
    expect((await stack.server.unread('rc')).conversations.find((c) => c.conv === 'cc-7')).toMatchObject({ lastSeq: 3, unread: 1, mentions: 0 });
  });
});
