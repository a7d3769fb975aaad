import { describe, expect, it } from 'vitest';
import type { RebaseResult } from '../../protocol/admin-replies.js';
import { rebaseConversation } from '../../server/admin/rebase.js';
import { adminOf, type EngineAdmin } from '../../server/engine/admin.js';
import type { PersistedRecord } from '../../server/engine/durable-backing.js';
import { decodeRecord, encodeRecord } from '../../server/engine/state-text.js';
import { durableStack } from './stack.js';

const BAD = 1_796_520_749_000;

/**
 * An operator's rebase (admin/rebase.ts) with the durable tier on: PostgreSQL merges heads and
 * lastSeqs upward, so without generations a roster, a head or a record read before the rebase
 * and written after it (a drain pass in flight) would keep the bad head there, and the next
 * restore would bring it back into Redis.
 */
describe('durable tier: a rebase', () => {
  // The bad seq must get in first: the guard off, as before it existed.
  const stack = durableStack('rebase', [{ redisPrefix: 'rb', config: { maxSeqJump: 0 }, durable: { run: false } }]);

  function parts() {
    const durable = stack.server.durable;
    const store = stack.server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    return { store, pg: durable.tier.pg, drain: () => durable.persister.drainAll(Date.now() + 20_000) };
  }
  const stateOf = async (uid: string, conv: string) => (await stack.server.unread(uid)).conversations.find((c) => c.conv === conv);

  it('a read-diffused group: what it kept above the new head (non-counting and @all seqs) does not come back from PostgreSQL', async () => {
    const { drain } = parts();
    await stack.server.members('rb-l', { add: ['rb-a', 'rb-b', 'rb-c', 'rb-d'] });
    await stack.server.post([
      { conv: 'rb-l', seq: 1, sender: 'rb-a' },
      { conv: 'rb-l', seq: 2, sender: 'rb-a' },
      { conv: 'rb-l', seq: 5, sender: 'rb-a', mentionAll: true },
      { conv: 'rb-l', seq: 7, sender: 'rb-a', counts: false, recalls: [8] },
    ]);
    await drain();
    expect(await stack.server.ok<RebaseResult>('POST', '/v1/admin/conversations/rb-l/rebase', { seq: 2 })).toMatchObject({ before: 7, head: 2 });
    await drain();
    // Redis lost: the conversation comes back from PostgreSQL, and 3..8 are other messages.
    await stack.admin.flushall();
    await stack.server.post([3, 4, 5, 6, 7, 8].map((seq) => ({ conv: 'rb-l', seq, sender: 'rb-c' })));
    expect(await stateOf('rb-b', 'rb-l')).toMatchObject({ lastSeq: 8, unread: 8, mentions: 0 });
  });

  it('reaches PostgreSQL, and writes read before it do not undo it there: a restore brings the lowered head back', async () => {
    const { store, pg, drain } = parts();
    await stack.server.members('rb-c', { add: ['rb-a', 'rb-b'] });
    await stack.server.post({ conv: 'rb-c', seq: 1, sender: 'rb-a' });
    await stack.server.post({ conv: 'rb-c', seq: BAD, sender: 'rb-a' });
    await drain();
    expect((await pg.loadConversations(['rb-c'])).get('rb-c')?.maxSeq).toBe(BAD);

    // A drain pass in flight: it read the roster, the head and b's record before the rebase.
    const roster = await store.readConversation('rb-c');
    if (!roster) throw new Error('no conversation to read');
    const rows = await stack.sql.query<{ w: string }>("SELECT w FROM redpoint_user_conv WHERE uid = 'rb-b' AND conv = 'rb-c'");
    const before = decodeRecord('rb-c', (await stack.admin.hget('rb:{u:rb-b}:c', 'rb-c')) ?? '');
    const staleRecord: PersistedRecord = { uid: 'rb-b', conv: 'rb-c', w: Number(rows.rows[0]?.w), text: encodeRecord(before) };

    expect(await stack.server.ok<RebaseResult>('POST', '/v1/admin/conversations/rb-c/rebase', { seq: 1 })).toMatchObject({ before: BAD, head: 1, members: 2 });
    await drain();
    // ... and writes them after it.
    await pg.writeConversation('rb-c', roster.state);
    await pg.writeHeads([{ conv: 'rb-c', maxSeq: BAD, gen: Number(roster.gen) }]);
    // A later write clock than the rebase's: only the generation can tell it is older.
    await pg.writeRecords([{ ...staleRecord, w: Date.now() + 60_000 }]);

    expect((await pg.loadConversations(['rb-c'])).get('rb-c')?.maxSeq).toBe(1);
    const b = (await pg.loadUsers(['rb-b'])).get('rb-b')?.records.find((r) => r.conv === 'rb-c');
    expect(b?.lastSeq).toBe(1);

    // Redis lost: everything comes back from PostgreSQL, at the lowered head.
    await stack.admin.flushall();
    await stack.server.post({ conv: 'rb-c', seq: 2, sender: 'rb-a' });
    expect(await stack.server.ok('POST', '/v1/admin/heads', { convs: ['rb-c'] })).toEqual({ heads: { 'rb-c': 2 } });
    expect(await stateOf('rb-b', 'rb-c')).toMatchObject({ lastSeq: 2, readSeq: 0, unread: 2 });
    expect(await stateOf('rb-a', 'rb-c')).toMatchObject({ lastSeq: 2, readSeq: 2, unread: 0 });
  });

  it('is refused, not acknowledged, when Redis is replaced by an empty server between its steps; a retry completes it', async () => {
    const { drain } = parts();
    await stack.server.members('rb-w', { add: ['rb-x', 'rb-y'] });
    await stack.server.post({ conv: 'rb-w', seq: 1, sender: 'rb-x' });
    await stack.server.post({ conv: 'rb-w', seq: BAD, sender: 'rb-x' });
    await drain();

    // The conversation step lands, then Redis is lost before it reached PostgreSQL: the
    // conversation comes back from there with the bad head, at its old generation.
    const engine = stack.server.engine;
    const real = adminOf(engine);
    const rebaseThenWipe: EngineAdmin['rebaseConversation'] = async (conv, seq) => {
      const step = await real.rebaseConversation(conv, seq);
      await stack.admin.flushall();
      return step;
    };
    const wiped = new Proxy(real, {
      get: (target, key) => (key === 'rebaseConversation' ? rebaseThenWipe : Reflect.get(target, key, target)),
    });
    await expect(rebaseConversation(engine, wiped, 'rb-w', 1)).rejects.toThrow(/run it again/);

    expect(await stack.server.ok<RebaseResult>('POST', '/v1/admin/conversations/rb-w/rebase', { seq: 1 })).toMatchObject({ before: BAD, head: 1, members: 2 });
    expect(await stack.server.ok('POST', '/v1/admin/heads', { convs: ['rb-w'] })).toEqual({ heads: { 'rb-w': 1 } });
    expect(await stateOf('rb-y', 'rb-w')).toMatchObject({ lastSeq: 1, readSeq: 0, unread: 1 });
  });
});
