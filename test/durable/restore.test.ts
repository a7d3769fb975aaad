import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { counts, durableStack } from './stack.js';

describe('durable tier: Redis may lose everything, no read position is lost', () => {
  const stack = durableStack('restore', [{ durable: { run: false } }]);

  it('after FLUSHALL every count, mute, mark, deletion and membership comes back from PostgreSQL', async () => {
    await stack.server.members('dm-ab', { add: ['alice', 'bob'] });
    await stack.server.members('team', { add: ['alice', 'bob', 'carol'], category: 'work' });
    await stack.server.post([
      { conv: 'dm-ab', seq: 1, sender: 'bob' },
      { conv: 'dm-ab', seq: 2, sender: 'bob' },
      { conv: 'team', seq: 1, sender: 'carol', mentions: ['alice'] },
      { conv: 'team', seq: 2, sender: 'bob' },
      { conv: 'team', seq: 3, sender: 'carol' },
    ]);
    await stack.server.ok('POST', '/v1/users/alice/read', { conv: 'dm-ab', seq: 1 });
    await stack.server.ok('PUT', '/v1/users/bob/conversations/team', { muted: true });
    await stack.server.ok('PUT', '/v1/users/bob/conversations/dm-ab', { markedUnread: true });
    await stack.server.ok('DELETE', '/v1/users/carol/conversations/team');
    const before = await Promise.all(['alice', 'bob', 'carol'].map((uid) => stack.server.unread(uid)));
    const durable = stack.server.durable;
    if (!durable) throw new Error('no durable tier');
    await durable.persister.drainAll(Date.now() + 20_000);

    await stack.admin.flushall();
    const after = await Promise.all(['alice', 'bob', 'carol'].map((uid) => stack.server.unread(uid)));
    expect(after.map(counts)).toEqual(before.map(counts));
    // A new epoch: clients re-snapshot instead of continuing a cursor of the lost history.
    for (let i = 0; i < 3; i++) expect(after[i]?.epoch).not.toBe(before[i]?.epoch);
  });

  it('a message to a conversation Redis lost is applied, not refused', async () => {
    await stack.admin.flushall();
    await stack.server.post({ conv: 'team', seq: 4, sender: 'bob' });
    const alice = await stack.server.unread('alice');
    const team = alice.conversations.find((c) => c.conv === 'team');
    // alice had read nothing of team: seqs 1..4, one mention (seq 1).
    expect(team).toMatchObject({ unread: 4, mentions: 1 });
    const bob = await stack.server.unread('bob');
    expect(bob.conversations.find((c) => c.conv === 'team')).toMatchObject({ unread: 0, muted: true });
  });

  it('an "unread from here" survives Redis losing the user: its generation, its lowered readSeq and the mentions it counts again; a read made before it is still ignored', async () => {
    await stack.server.members('uf', { add: ['ua', 'ub'] });
    await stack.server.post(Array.from({ length: 6 }, (_, i) => ({ conv: 'uf', seq: i + 1, sender: 'ub', ...(i + 1 === 4 ? { mentions: ['ua'] } : {}) })));
    await stack.server.ok('POST', '/v1/users/ua/read', { conv: 'uf', seq: 6, gen: 0 });
    await stack.server.ok('POST', '/v1/users/ua/conversations/uf/unread-from', { seq: 3, gen: 1 });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const client = new pg.Client({ connectionString: stack.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query(
        "SELECT read_seq, read_gen, mention_seqs, read_mention_seqs FROM redpoint_user_conv WHERE uid = 'ua' AND conv = 'uf'",
      );
      expect(rows).toEqual([{ read_seq: '2', read_gen: '1', mention_seqs: ['4'], read_mention_seqs: [] }]);
    } finally {
      await client.end();
    }
    await stack.admin.flushall();
    const ua = await stack.server.unread('ua');
    expect(ua.conversations.find((c) => c.conv === 'uf')).toMatchObject({ readSeq: 2, unread: 4, mentions: 1 });
    // The restored record keeps the generation: another device's read made before the act is ignored.
    expect(await stack.server.ok('POST', '/v1/users/ua/read', { conv: 'uf', seq: 6, gen: 0 })).toMatchObject({
      changed: false,
      state: { readSeq: 2, readGen: 1 },
    });
  });

  it("an operator's reset-read survives Redis losing the user (readSeq goes by the read generation in PostgreSQL)", async () => {
    await stack.server.members('reset', { add: ['ra', 'rb'] });
    await stack.server.post([
      { conv: 'reset', seq: 1, sender: 'rb' },
      { conv: 'reset', seq: 2, sender: 'rb' },
      { conv: 'reset', seq: 3, sender: 'rb' },
    ]);
    await stack.server.ok('POST', '/v1/users/ra/read', { conv: 'reset', seq: 3 });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.server.ok('PUT', '/v1/users/ra/conversations/reset/read', { seq: 1 });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();
    const ra = await stack.server.unread('ra');
    expect(ra.conversations.find((c) => c.conv === 'reset')).toMatchObject({ unread: 2 });
  });

  it('after FLUSHALL the last activity and the "mentions only" level come back (issue 43, migration 6)', async () => {
    const T0 = 1_760_000_000_000;
    await stack.server.members('lv', { add: ['la', 'lb'] });
    await stack.server.post([
      { conv: 'lv', seq: 1, sender: 'lb', at: T0 },
      { conv: 'lv', seq: 2, sender: 'lb', mentions: ['la'], at: T0 + 7 },
      { conv: 'lv', seq: 3, sender: 'lb' },
    ]);
    await stack.server.ok('PUT', '/v1/users/la/conversations/lv', { level: 'mentions' });
    const before = await stack.server.unread('la');
    expect(before).toMatchObject({ total: 1, mentions: 1 });
    expect(before.conversations).toMatchObject([{ conv: 'lv', unread: 3, mentions: 1, level: 'mentions', at: T0 + 7 }]);
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();
    const after = await stack.server.unread('la');
    expect({ ...after, epoch: '', version: 0 }).toEqual({ ...before, epoch: '', version: 0 });
    const client = new pg.Client({ connectionString: stack.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ last_at: string; mentions_only: boolean; muted: boolean }>(
        "SELECT last_at, mentions_only, muted FROM redpoint_user_conv WHERE conv = 'lv' ORDER BY uid",
      );
      expect(rows).toEqual([
        { last_at: String(T0 + 7), mentions_only: true, muted: false },
        { last_at: String(T0 + 7), mentions_only: false, muted: false },
      ]);
    } finally {
      await client.end();
    }
  });

  it('PostgreSQL holds registers, not counts, keyed by uid and conv', async () => {
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const client = new pg.Client({ connectionString: stack.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ last_seq: string; read_seq: string; muted: boolean }>(
        "SELECT last_seq, read_seq, muted FROM redpoint_user_conv WHERE uid = 'bob' AND conv = 'team'",
      );
      expect(rows).toEqual([{ last_seq: '4', read_seq: '4', muted: true }]);
      const members = await client.query<{ uid: string }>("SELECT uid FROM redpoint_conv_members WHERE conv = 'team' ORDER BY uid");
      expect(members.rows.map((r) => r.uid)).toEqual(['alice', 'bob', 'carol']);
    } finally {
      await client.end();
    }
  });

  it('a record Redis kept without its user (the meta lost) is merged with the rows: mentions, non-counting seqs and reads of both copies count, none is lost', async () => {
    await stack.server.members('km', { add: ['ka', 'kb'] });
    await stack.server.post([
      { conv: 'km', seq: 1, sender: 'kb', mentions: ['ka'] },
      { conv: 'km', seq: 2, sender: 'kb' },
    ]);
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    // Newer than PostgreSQL's rows, in Redis only: a mention, a reaction and a recall.
    await stack.server.post([
      { conv: 'km', seq: 3, sender: 'kb', mentions: ['ka'] },
      { conv: 'km', seq: 4, sender: 'kb', counts: false },
      { conv: 'km', seq: 5, sender: 'kb', counts: false, recalls: [2] },
      { conv: 'km', seq: 6, sender: 'kb' },
    ]);
    const before = await stack.server.unread('ka');
    expect(before.conversations.find((c) => c.conv === 'km')).toMatchObject({ lastSeq: 6, unread: 3, mentions: 2 });
    // The user's meta (and its stream) lost, its records kept.
    const metas = await stack.admin.keys('*{u:ka}:m');
    expect(metas).toHaveLength(1);
    await stack.admin.del(...metas, ...(await stack.admin.keys('*{u:ka}:s')), ...(await stack.admin.keys('*{u:ka}:p')));
    const after = await stack.server.unread('ka');
    expect(after.conversations.find((c) => c.conv === 'km')).toMatchObject({ lastSeq: 6, unread: 3, mentions: 2 });
    expect(counts(after)).toEqual(counts(before));
  });
});
