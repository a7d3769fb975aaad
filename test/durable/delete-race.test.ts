import { describe, expect, it } from 'vitest';
import { durableStack } from './stack.js';

/**
 * Deleting a conversation for everyone while a drain pass is in flight: the pass read the roster
 * (or the head) before the deletion and writes it after. Without a tombstone that write puts the
 * rows back, and the next message to the deleted conversation restores it from PostgreSQL and
 * is applied instead of refused. The tombstone holds the deletion's generation: older rosters
 * are dropped, rows that slip in anyway are not restored, and a conversation created again
 * (newer generations) is persisted and restored as usual.
 */
describe('durable tier: a drain pass in flight across a conversation deletion', () => {
  const stack = durableStack('deleterace', [{ redisPrefix: 'dr', durable: { run: false } }]);

  function parts() {
    const durable = stack.server.durable;
    const store = stack.server.engine.durableStore?.();
    if (!durable || !store) throw new Error('no durable tier');
    return { store, pg: durable.tier.pg, drain: () => durable.persister.drainAll(Date.now() + 20_000) };
  }

  it('a roster and a head read before the deletion and written after it do not bring the conversation back', async () => {
    const { store, pg, drain } = parts();
    await stack.server.members('dr-c1', { add: ['dr-a', 'dr-b'] });
    await stack.server.post({ conv: 'dr-c1', seq: 1, sender: 'dr-a' });
    await drain();
    // The pass in flight: it read the roster and the head, then the deletion ran.
    const read = await store.readConversation('dr-c1');
    if (!read) throw new Error('no conversation to read');
    await stack.server.ok('DELETE', '/v1/conversations/dr-c1');
    await pg.writeConversation('dr-c1', read.state);
    await pg.writeHeads([{ conv: 'dr-c1', maxSeq: Number(read.head), gen: Number(read.gen) }]);
    await drain();

    const members = await stack.sql.query('SELECT uid FROM redpoint_conv_members WHERE conv = $1', ['dr-c1']);
    expect(members.rows).toEqual([]);
    expect((await pg.loadConversations(['dr-c1'])).has('dr-c1')).toBe(false);
    // Redis lost too: nothing brings it back.
    await stack.admin.flushall();
    expect((await stack.server.api('POST', '/v1/messages', { conv: 'dr-c1', seq: 2, sender: 'dr-a' })).status).toBe(404);
    expect((await stack.server.unread('dr-b')).conversations.find((c) => c.conv === 'dr-c1')).toBeUndefined();
  });

  it('a conversation created again after the deletion is persisted and restored', async () => {
    const { pg, drain } = parts();
    await stack.server.members('dr-c2', { add: ['dr-p', 'dr-q'] });
    await stack.server.post({ conv: 'dr-c2', seq: 1, sender: 'dr-p' });
    await drain();
    await stack.server.ok('DELETE', '/v1/conversations/dr-c2');
    await drain();
    await stack.server.members('dr-c2', { add: ['dr-q', 'dr-r'] });
    await stack.server.post({ conv: 'dr-c2', seq: 2, sender: 'dr-q' });
    await drain();
    const saved = (await pg.loadConversations(['dr-c2'])).get('dr-c2');
    expect(saved?.members.map((m) => m.uid).sort()).toEqual(['dr-q', 'dr-r']);

    await stack.admin.flushall();
    await stack.server.post({ conv: 'dr-c2', seq: 3, sender: 'dr-q' });
    expect((await stack.server.unread('dr-r')).conversations.find((c) => c.conv === 'dr-c2')).toMatchObject({ lastSeq: 3 });
    expect((await stack.server.unread('dr-p')).conversations.find((c) => c.conv === 'dr-c2')).toBeUndefined();
  });
});
