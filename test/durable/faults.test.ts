import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../helpers/test-server.js';
import { counts, durableStack } from './stack.js';

/**
 * The durable tier under faults, with two server instances on one Redis and one PostgreSQL (two
 * processes of one deployment, in one test process): PostgreSQL crashed under traffic, two
 * drainers at once, a restore racing a write from the other instance, a cold eviction racing a
 * message. Afterwards Redis is flushed and every count must come back from PostgreSQL as it was.
 */

describe('durable tier under faults', () => {
  const shared = { redisPrefix: 'f', largeGroupThreshold: 3, durable: { persistIntervalMs: 30 } };
  const stack = durableStack('faults', [shared, shared]);
  let a: TestServer;
  let b: TestServer;
  let n = 0;
  beforeAll(() => {
    [a, b] = stack.servers as [TestServer, TestServer];
  });

  const drained = async (): Promise<void> => {
    await a.durable?.persister.drainAll(Date.now() + 30_000);
    await b.durable?.persister.drainAll(Date.now() + 30_000);
  };

  /** A conversation of `members` with `messages` from its first member, on alternating servers. */
  const traffic = async (tag: string, members: string[], messages: number): Promise<string> => {
    const conv = `${tag}-${++n}`;
    await a.members(conv, { add: members });
    for (let seq = 1; seq <= messages; seq++) {
      const server = seq % 2 === 0 ? a : b;
      await server.post({ conv, seq, sender: members[seq % members.length] as string, ...(seq % 5 === 0 ? { mentions: [members[0] as string] } : {}) });
      if (seq % 3 === 0) await server.ok('POST', `/v1/users/${members[1]}/read`, { conv, seq: seq - 1 });
    }
    return conv;
  };

  it('PostgreSQL crashed under traffic: every API keeps working on Redis, the backlog drains once it is back, nothing is lost', async () => {
    const users = ['pa', 'pb', 'pc', 'pd'];
    await traffic('pg', users, 6);
    await stack.postgres.kill();
    // Served from Redis meanwhile: messages, reads, settings, pulls.
    const conv = await traffic('pg-down', users, 12);
    await b.ok('PUT', `/v1/users/pc/conversations/${conv}`, { muted: true });
    const client = await a.client('pd');
    await client.sync();
    await client.close();
    const backlog = await a.engine.durableStore?.().backlog(['']);
    expect(backlog?.marks).toBeGreaterThan(0);
    const before = await Promise.all(users.map((uid) => a.unread(uid)));
    await stack.postgres.start();
    await drained();
    expect((await a.engine.durableStore?.().backlog(['']))?.marks).toBe(0);
    await stack.admin.flushall();
    const after = await Promise.all(users.map((uid) => b.unread(uid)));
    expect(after.map(counts)).toEqual(before.map(counts));
  });

  // Threads' registry is written through (PROTOCOL.md "Threads"): a thread's first reply needs
  // PostgreSQL, as a topic's first message does; replies to threads registered before do not.
  it('PostgreSQL down: a known thread takes replies; a new thread is refused, nothing recorded, and its retry lands once PostgreSQL is back', async () => {
    const conv = `pg-thread-${++n}`;
    await a.members(conv, { add: ['ta', 'tb'] });
    await a.post([
      { conv, seq: 1, sender: 'ta' },
      { conv, thread: 1, rootSender: 'ta', seq: 1, sender: 'tb' },
    ]);
    await stack.postgres.kill();
    try {
      await b.post({ conv, thread: 1, seq: 2, sender: 'tb' });
      const refused = await b.api('POST', '/v1/messages', { conv, thread: 2, rootSender: 'ta', seq: 1, sender: 'tb' });
      expect(refused.status).toBeGreaterThanOrEqual(500);
      // Its child not made (read from Redis itself: a read through the engine would try PostgreSQL).
      expect(await stack.admin.exists(`f:{c:${conv}#r:2}`)).toBe(0);
    } finally {
      await stack.postgres.start();
    }
    await b.post({ conv, thread: 2, rootSender: 'ta', seq: 1, sender: 'tb' });
    expect((await a.unread('ta')).conversations.filter((c) => c.conv.startsWith(`${conv}#r:`)).map((c) => [c.conv, c.unread])).toEqual([
      [`${conv}#r:1`, 2],
      [`${conv}#r:2`, 1],
    ]);
    // A client of its own: the stack's shared one died with PostgreSQL.
    const client = new pg.Client({ connectionString: stack.databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ root: string }>('SELECT root FROM redpoint_threads WHERE conv = $1 ORDER BY root', [conv]);
      expect(rows.map((r) => r.root)).toEqual(['1', '2']);
    } finally {
      await client.end();
    }
  });

  it('two drainers at once never write an older state over a newer one', async () => {
    const users = ['da', 'db', 'dc'];
    const conv = `dd-${++n}`;
    await a.members(conv, { add: users });
    // Both instances drain on their own (30 ms) while both take traffic for the same users.
    await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const server = i % 2 === 0 ? a : b;
        await server.post({ conv, seq: i + 1, sender: 'da' });
        await server.ok('POST', '/v1/users/db/read', { conv, seq: i + 1 });
        await server.ok('PUT', `/v1/users/dc/conversations/${conv}`, { muted: i % 2 === 0 });
      }),
    );
    const before = await Promise.all(users.map((uid) => a.unread(uid)));
    await drained();
    await stack.admin.flushall();
    const after = await Promise.all(users.map((uid) => b.unread(uid)));
    expect(after.map(counts)).toEqual(before.map(counts));
  });

  it("two drainers at once on a burst of roster changes: PostgreSQL's rosters end as Redis's", async () => {
    const convs = Array.from({ length: 24 }, (_, i) => `rr-${++n}-${i}`);
    const people = ['ra1', 'ra2', 'ra3', 'ra4', 'ra5', 'ra6'];
    await Promise.all(convs.map((conv) => a.members(conv, { add: people.slice(0, 2) })));
    // Joins and leaves from both instances, while both drain on their own (30 ms), in batches.
    await Promise.all(
      convs.map(async (conv, i) => {
        for (let step = 0; step < 6; step++) {
          const server = (i + step) % 2 === 0 ? a : b;
          const who = people[(i + step) % people.length] as string;
          await server.members(conv, step % 3 === 2 ? { remove: [who] } : { add: [who] });
        }
      }),
    );
    await drained();
    const store = a.engine.durableStore?.();
    const pgStore = a.durable?.tier.pg;
    if (!store || !pgStore) throw new Error('no durable tier');
    const saved = await pgStore.loadConversations(convs);
    for (const conv of convs) {
      const inRedis = await store.readConversation(conv);
      const members = (inRedis?.state.members ?? []).map((m) => `${m.uid}@${m.joinGen}`).sort();
      expect({ conv, members: (saved.get(conv)?.members ?? []).map((m) => `${m.uid}@${m.joinGen}`).sort() }).toEqual({ conv, members });
      expect(saved.get(conv)?.gen).toBe(inRedis?.state.gen);
    }
  });

  it('a restore racing writes from the other instance on the same user: exact', async () => {
    const users = ['ra', 'rb'];
    const conv = await traffic('race', users, 10);
    await drained();
    await stack.admin.flushall();
    // Both instances find rb missing at once and restore it while applying their own writes.
    await Promise.all([
      a.ok('POST', '/v1/users/rb/read', { conv, seq: 4 }),
      b.post({ conv, seq: 11, sender: 'ra' }),
      b.ok('POST', '/v1/users/rb/read', { conv, seq: 10 }),
      a.post({ conv, seq: 12, sender: 'ra', mentions: ['rb'] }),
    ]);
    const rb = await a.unread('rb');
    const row = rb.conversations.find((c) => c.conv === conv);
    // Head 12, read 10 (the max of its own message 9 and every read, whatever the order), one mention above it (12).
    expect(row).toMatchObject({ unread: 2, mentions: 1 });
    expect(rb.total).toBe(2);
  });

  it('PostgreSQL holds what Redis holds once drained (no row older than Redis)', async () => {
    await drained();
    const client = new pg.Client({ connectionString: stack.databaseUrl });
    await client.connect();
    try {
      // Write-diffused conversations: their records hold the head (read-diffused ones read it from the conversation).
      const { rows } = await client.query<{ uid: string; conv: string; last_seq: string; read_seq: string }>(
        'SELECT uid, conv, last_seq, read_seq FROM redpoint_user_conv WHERE NOT large AND member ORDER BY uid, conv',
      );
      for (const row of rows) {
        const summary = await a.unread(row.uid);
        const view = summary.conversations.find((c) => c.conv === row.conv);
        if (view) expect({ conv: row.conv, unread: view.unread }).toEqual({ conv: row.conv, unread: Math.max(0, Number(row.last_seq) - Number(row.read_seq)) });
      }
      expect(rows.length).toBeGreaterThan(3);
    } finally {
      await client.end();
    }
  });
});

describe('durable tier: cold users leave Redis', () => {
  const stack = durableStack('cold', [{ redisPrefix: 'c', durable: { persistIntervalMs: 20, coldAfterSeconds: 1, run: false } }]);

  const keysOf = async (uid: string): Promise<string[]> => (await stack.admin.keys('c:*')).filter((k) => k.includes(`{u:${uid}}`));

  it('an idle user whose state PostgreSQL holds is removed entirely, and comes back whole on its next touch', async () => {
    await stack.server.members('cold-1', { add: ['ca', 'cb'] });
    await stack.server.post([
      { conv: 'cold-1', seq: 1, sender: 'cb' },
      { conv: 'cold-1', seq: 2, sender: 'cb', mentions: ['ca'] },
    ]);
    // ca's setting mutedMentions (its key q) goes with the user too, and comes back from PostgreSQL.
    await stack.server.ok('PUT', '/v1/users/ca/settings', { mutedMentions: true });
    const before = await stack.server.unread('ca');
    expect(before.mutedMentions).toBe(true);
    const durable = stack.server.durable;
    if (!durable) throw new Error('no durable tier');
    const store = stack.server.engine.durableStore?.();
    if (!store) throw new Error('no durable store');
    // Not yet persisted: not evicted, even when long idle.
    const sweepNow = (at: number) =>
      import('../../server/durable/cold-sweep.js').then(({ ColdSweep }) =>
        new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, silent, stack.server.server.metrics).sweepOnce(at),
      );
    expect(await sweepNow(Date.now() + 60_000)).toBe(0);
    expect(await keysOf('ca')).not.toEqual([]);
    await durable.persister.drainAll(Date.now() + 20_000);
    expect(await sweepNow(Date.now() + 60_000)).toBeGreaterThanOrEqual(2);
    expect(await keysOf('ca')).toEqual([]);
    expect(await keysOf('cb')).toEqual([]);
    const after = await stack.server.unread('ca');
    expect(counts(after)).toEqual(counts(before));
    expect(after.mutedMentions).toBe(true);
    expect(after.epoch).not.toBe(before.epoch);
    expect(await keysOf('ca')).not.toEqual([]);
  });

  it('a user with a join in flight (a live cap claim) is not cold; once the claim lapses it goes, claims and all', async () => {
    await stack.server.members('cold-3', { add: ['ja', 'jb'] });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const store = stack.server.engine.durableStore?.();
    const durable = stack.server.durable;
    if (!store || !durable) throw new Error('no durable tier');
    // The cap's claim of a join whose membership op has not landed (a call between its steps).
    const [claim] = await stack.server.engine.claimJoins('cold-3-next', ['ja'], { cap: 10, holdMs: 1_500 });
    expect(claim?.outcome).toBe('claimed');
    const { ColdSweep } = await import('../../server/durable/cold-sweep.js');
    const sweep = new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, silent, stack.server.server.metrics);
    await sweep.sweepOnce(Date.now() + 60_000);
    expect(await keysOf('ja')).toContain('c:{u:ja}:j');
    expect(await keysOf('ja')).not.toEqual(['c:{u:ja}:j']);
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    await sweep.sweepOnce(Date.now() + 60_000);
    expect(await keysOf('ja')).toEqual([]);
  });

  it('an eviction racing a message to that user: the message counts, once', async () => {
    await stack.server.members('cold-2', { add: ['ra', 'rb'] });
    await stack.server.post({ conv: 'cold-2', seq: 1, sender: 'rb' });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    const store = stack.server.engine.durableStore?.();
    const durable = stack.server.durable;
    if (!store || !durable) throw new Error('no durable tier');
    const { ColdSweep } = await import('../../server/durable/cold-sweep.js');
    const sweep = new ColdSweep(store, durable.tier.pg, { coldAfterSeconds: 1, sweepSeconds: 1 }, silent, stack.server.server.metrics);
    for (let seq = 2; seq <= 6; seq++) await Promise.all([sweep.sweepOnce(Date.now() + 60_000), stack.server.post({ conv: 'cold-2', seq, sender: 'rb' })]);
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await sweep.sweepOnce(Date.now() + 60_000);
    const ra = await stack.server.unread('ra');
    expect(ra.conversations.find((c) => c.conv === 'cold-2')).toMatchObject({ unread: 6 });
    expect(ra.total).toBe(6);
  });
});

const silent = (await import('pino')).pino({ level: 'silent' });
