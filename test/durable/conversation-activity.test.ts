import { describe, expect, it } from 'vitest';
import { durableStack } from './stack.js';

/**
 * Issue 43 on the durable tier: what a read-diffused conversation keeps beside its head (its last
 * activity and its @all seqs: PullReply headAt and mentionAll) is written to PostgreSQL with the
 * head (migration 6) and comes back when Redis loses the conversation.
 */
describe('durable tier: a read-diffused conversation keeps its last activity and @all seqs', () => {
  const stack = durableStack('activity', [{ durable: { run: false }, largeGroupThreshold: 3 }]);
  const T0 = 1_760_000_000_000;

  it('after FLUSHALL the last activity and an unread @all still show', async () => {
    await stack.server.members('big', { add: ['a', 'b', 'c', 'd'] });
    await stack.server.post([
      { conv: 'big', seq: 1, sender: 'a', mentionAll: true, at: T0 },
      { conv: 'big', seq: 2, sender: 'b', at: T0 + 9 },
    ]);
    // A late, older message with an @all: the head does not move, the kept seqs do.
    await stack.server.post({ conv: 'big', seq: 1, sender: 'a', mentionAll: true, at: T0 });
    const before = await stack.server.unread('c');
    expect(before).toMatchObject({ total: 2, mentions: 1 });
    expect(before.conversations).toMatchObject([{ conv: 'big', unread: 2, mentions: 1, at: T0 + 9 }]);
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ last_at: string; mention_all: string[] }>(
      "SELECT last_at, mention_all FROM redpoint_conversations WHERE conv = 'big'",
    );
    expect(rows).toEqual([{ last_at: String(T0 + 9), mention_all: ['1'] }]);
    await stack.admin.flushall();
    const after = await stack.server.unread('c');
    expect({ ...after, epoch: '', version: 0 }).toEqual({ ...before, epoch: '', version: 0 });
    const pulled = await stack.server.asUser<{ headAt?: Record<string, number>; mentionAll?: Record<string, number[]> }>('c', 'GET', '/v1/sync');
    expect(pulled.body).toMatchObject({ headAt: { big: T0 + 9 }, mentionAll: { big: [1] } });
    // A read clears it, on the restored state too.
    await stack.server.ok('POST', '/v1/users/c/read', { conv: 'big', seq: 1 });
    expect(await stack.server.unread('c')).toMatchObject({ total: 1, mentions: 0 });
  });

  // The durable property test found it (seed -2123490147): a pull read the heads and the extras
  // at once, and the extras' read found the conversation not yet restored by the heads' read.
  it('after FLUSHALL the first thing read is a sync: its last activity and @all still show', async () => {
    await stack.server.members('first', { add: ['fa', 'fb', 'fc', 'fd'] });
    await stack.server.post({ conv: 'first', seq: 1, sender: 'fa', mentionAll: true, at: T0 + 5 });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();
    // The engine's own read restores what Redis lacks, whatever was read before it.
    expect(await stack.server.engine.headExtras(['first'])).toEqual(new Map([['first', { at: T0 + 5, mentionAll: [1], nocount: [] }]]));
    await stack.admin.flushall();
    const pulled = await stack.server.asUser<{ headAt?: Record<string, number>; mentionAll?: Record<string, number[]> }>('fc', 'GET', '/v1/sync');
    expect(pulled.body).toMatchObject({ headAt: { first: T0 + 5 }, mentionAll: { first: [1] } });
  });

  it('an @all from before the switch to read diffusion, redelivered after Redis lost the conversation, counts once', async () => {
    await stack.server.members('grow', { add: ['ga', 'gb', 'gc'] });
    const everyone = { conv: 'grow', seq: 1, sender: 'ga', mentionAll: true, at: T0 };
    await stack.server.post(everyone);
    // Read-diffused from here (4 > 3): its head then, 1, is kept ('#L', large_from).
    await stack.server.members('grow', { add: ['gd'] });
    expect(await stack.server.unread('gc')).toMatchObject({ total: 1, mentions: 1 });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();
    await stack.server.post(everyone);
    expect(await stack.server.unread('gc')).toMatchObject({ total: 1, mentions: 1 });
    expect(await stack.server.unread('gd')).toMatchObject({ total: 0, mentions: 0 });
  });
});
