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
