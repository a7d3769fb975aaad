import { describe, expect, it } from 'vitest';
import { durableStack } from './stack.js';

/**
 * Issue 43 "what counts" on the durable tier: a record's non-counting seqs (a `counts: false`
 * message, a recall) are written to PostgreSQL (migration 8) and come back when Redis loses them.
 */
describe('durable tier: non-counting seqs and recalls survive a Redis loss', () => {
  const stack = durableStack('counts', [{ durable: { run: false } }]);

  it('after FLUSHALL a recalled message and a reaction still do not count', async () => {
    await stack.server.members('g', { add: ['a', 'b'] });
    await stack.server.post([
      { conv: 'g', seq: 1, sender: 'a' },
      { conv: 'g', seq: 2, sender: 'a', mentions: ['b'] },
      { conv: 'g', seq: 3, sender: 'a', counts: false },
    ]);
    await stack.server.post({ conv: 'g', seq: 4, sender: 'a', counts: false, recalls: [2] });
    const before = await stack.server.unread('b');
    expect(before).toMatchObject({ total: 1, mentions: 0 });
    expect(before.conversations).toMatchObject([{ conv: 'g', lastSeq: 4, unread: 1, mentions: 0 }]);
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ nocount_seqs: string[] }>("SELECT nocount_seqs FROM redpoint_user_conv WHERE uid = 'b' AND conv = 'g'");
    expect(rows).toEqual([{ nocount_seqs: ['2', '3', '4'] }]);
    await stack.admin.flushall();
    const after = await stack.server.unread('b');
    expect({ ...after, epoch: '', version: 0 }).toEqual({ ...before, epoch: '', version: 0 });
    // The recall redelivered after the restore changes nothing; a counting message counts.
    await stack.server.post({ conv: 'g', seq: 4, sender: 'a', counts: false, recalls: [2] });
    await stack.server.post({ conv: 'g', seq: 5, sender: 'a' });
    expect(await stack.server.unread('b')).toMatchObject({ total: 2, mentions: 0 });
  });
});

/**
 * The same for a read-diffused conversation: its non-counting seqs are kept with the conversation
 * ('#N'), written to PostgreSQL with its head (migration 9) and restored with it.
 */
describe('durable tier: a read-diffused conversation keeps its non-counting seqs', () => {
  const stack = durableStack('counts-large', [{ durable: { run: false }, largeGroupThreshold: 3 }]);

  it('after FLUSHALL a recalled message, a recalled @all and a reaction still do not count', async () => {
    await stack.server.members('big', { add: ['a', 'b', 'c', 'd'] });
    await stack.server.post([
      { conv: 'big', seq: 1, sender: 'a' },
      { conv: 'big', seq: 2, sender: 'a', mentions: ['b'] },
      { conv: 'big', seq: 3, sender: 'a', mentionAll: true },
      { conv: 'big', seq: 4, sender: 'a', counts: false },
    ]);
    await stack.server.post({ conv: 'big', seq: 5, sender: 'a', counts: false, recalls: [2, 3] });
    const before = await stack.server.unread('b');
    expect(before).toMatchObject({ total: 1, mentions: 0 });
    expect(await stack.server.unread('c')).toMatchObject({ total: 1, mentions: 0 });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ nocount_seqs: string[] }>("SELECT nocount_seqs FROM redpoint_conversations WHERE conv = 'big'");
    expect(rows).toEqual([{ nocount_seqs: ['2', '3', '4', '5'] }]);
    await stack.admin.flushall();
    const after = await stack.server.unread('b');
    expect({ ...after, epoch: '', version: 0 }).toEqual({ ...before, epoch: '', version: 0 });
    expect(await stack.server.unread('c')).toMatchObject({ total: 1, mentions: 0 });
    const pulled = await stack.server.asUser<{ nocount?: Record<string, number[]> }>('c', 'GET', '/v1/sync');
    expect(pulled.body).toMatchObject({ nocount: { big: [2, 3, 4, 5] } });
    // Redelivered after the restore, nothing changes; a counting message counts.
    await stack.server.post({ conv: 'big', seq: 5, sender: 'a', counts: false, recalls: [2, 3] });
    await stack.server.post({ conv: 'big', seq: 6, sender: 'a' });
    expect(await stack.server.unread('b')).toMatchObject({ total: 2, mentions: 0 });
  });
});
