import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Persister } from '../../server/durable/persister.js';
import type { PgStore } from '../../server/durable/pg-store.js';
import type { DurableStore, PersistedRecord } from '../../server/engine/durable-backing.js';
import { type RedisDurableDeps, RedisDurableStore } from '../../server/engine/redis/redis-durable.js';
import { Metrics } from '../../server/metrics/metrics.js';
import { readCounter, setCounter, unpackToLegacy } from '../helpers/user-meta.js';
import { durableStack } from './stack.js';

/**
 * The drainer's pipeline (persister.ts): a shard's user records go to PostgreSQL in chunks, up to
 * three in flight. What must hold whatever the interleaving: every mark is written once per pass
 * (a chunk in flight hides its marks from the next), a record changed while its chunk is in flight
 * keeps its mark and is written again (by the next pass: a pass takes only what was waiting when
 * it began), and a chunk that fails leaves its marks without stopping the others' from clearing.
 */
describe('durable tier: the drain pipeline', () => {
  const stack = durableStack('pipeline', [{ durable: { run: false } }]);
  const silent = pino({ level: 'silent' });

  /** `users` users each with a record dirty in conversation `conv` (one 1:1 conversation each). */
  async function dirtyUsers(tag: string, users: number): Promise<void> {
    for (let i = 0; i < users; i += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, users - i) }, (_, k) => stack.server.members(`${tag}c${i + k}`, { add: [`${tag}a${i + k}`, `${tag}b${i + k}`] })),
      );
    }
    await stack.server.post(Array.from({ length: users }, (_, i) => ({ conv: `${tag}c${i}`, seq: 1, sender: `${tag}b${i}` })));
  }

  function parts(): { store: DurableStore; pg: PgStore } {
    const store = stack.server.engine.durableStore?.();
    const durable = stack.server.durable;
    if (!store || !durable) throw new Error('no durable tier');
    return { store, pg: durable.tier.pg };
  }

  function drainer(store: DurableStore, pg: PgStore, batch: number, rosterBatch?: { rosters: number; members: number }): Persister {
    return new Persister(store, pg, { intervalMs: 1_000, batch, backlogWarn: 1e9, rosterBatch }, silent, new Metrics({ processMetrics: false }));
  }

  /** A point a step announces (`tookNow`, awaited as `took`), then holds at until `open`. */
  function pause(): { took: Promise<void>; tookNow: () => void; gate: Promise<void>; open: () => void } {
    let tookNow: () => void = () => undefined;
    let open: () => void = () => undefined;
    const took = new Promise<void>((resolve) => {
      tookNow = resolve;
    });
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    return { took, tookNow, gate, open };
  }

  /** The member ids of a conversation as PostgreSQL holds it, sorted. */
  async function storedMembers(pg: PgStore, conv: string): Promise<string[] | undefined> {
    return (await pg.loadConversations([conv]))
      .get(conv)
      ?.members.map((m) => m.uid)
      .sort();
  }

  /** A PgStore whose writes of `uid`'s records announce themselves (`took`), then wait for `gate`. */
  function heldRecords(pg: PgStore, uid: string, took: () => void, gate: Promise<void>): PgStore {
    return Object.create(pg, {
      writeRecords: {
        value: async (records: readonly PersistedRecord[]) => {
          if (records.some((r) => r.uid === uid)) {
            took();
            await gate;
          }
          return pg.writeRecords(records);
        },
      },
    });
  }

  /** PostgreSQL's read position of each (uid, conv) the tag names. */
  async function storedReads(tag: string): Promise<Map<string, number>> {
    const { rows } = await stack.sql.query<{ uid: string; conv: string; read_seq: string }>(
      'SELECT uid, conv, read_seq FROM redpoint_user_conv WHERE uid LIKE $1',
      [`${tag}%`],
    );
    return new Map(rows.map((r) => [`${r.uid}|${r.conv}`, Number(r.read_seq)]));
  }

  it('writes every mark once per pass, in chunks in flight together, and leaves nothing behind', async () => {
    const { store, pg } = parts();
    await dirtyUsers('once', 300);
    const before = (await store.backlog([''])).marks;
    expect(before).toBeGreaterThanOrEqual(600);
    const written: string[] = [];
    let inFlight = 0;
    let most = 0;
    const slowPg: PgStore = Object.create(pg, {
      writeRecords: {
        value: async (records: readonly PersistedRecord[]) => {
          for (const r of records) written.push(`${r.uid}|${r.conv}`);
          inFlight++;
          most = Math.max(most, inFlight);
          // Long enough that the next chunks are taken and started meanwhile.
          await new Promise((resolve) => setTimeout(resolve, 30));
          try {
            return await pg.writeRecords(records);
          } finally {
            inFlight--;
          }
        },
      },
    });
    await drainer(store, slowPg, 40).drainOnce();
    expect(written.length).toBeGreaterThanOrEqual(600);
    expect(new Set(written).size).toBe(written.length);
    expect(most).toBe(3);
    const left = await store.dirty('', 10_000, 'users');
    expect(left.users.filter((m) => m.member.startsWith('once'))).toEqual([]);
    const stored = await storedReads('once');
    expect(stored.size).toBe(600);
  });

  it('a record changed while its chunk is in flight keeps its mark, and is written again with the newer state', async () => {
    const { store, pg } = parts();
    await dirtyUsers('moved', 120);
    await stack.server.post(Array.from({ length: 120 }, (_, i) => ({ conv: `movedc${i}`, seq: 2, sender: `movedb${i}` })));
    let victim: { uid: string; conv: string } | undefined;
    /** The victim's muted flag as each upsert carried it (the record text's flags: member, muted, ...). */
    const written: string[] = [];
    const pausing: PgStore = Object.create(pg, {
      writeRecords: {
        value: async (records: readonly PersistedRecord[]) => {
          // The first chunk: its records were read; one of them changes before the upsert. Which
          // users the first chunk holds depends on the marks' write clocks (sender or recipient):
          // muting changes either's record.
          if (!victim) {
            const r = records.find((x) => x.uid.startsWith('moved'));
            if (!r) throw new Error('none of this test’s records in the first chunk');
            victim = { uid: r.uid, conv: r.conv };
            await stack.server.ok('PUT', `/v1/users/${victim.uid}/conversations/${victim.conv}`, { muted: true });
          }
          const text = records.find((x) => x.uid === victim?.uid && x.conv === victim.conv)?.text;
          if (text) written.push(text.charAt(1));
          return pg.writeRecords(records);
        },
      },
    });
    // The mark kept after the stale write is taken again by this pass (its chunk is no longer in
    // flight) or by the next: either way the record is written twice, the newer state last.
    await drainer(store, pausing, 50).drainOnce();
    await drainer(store, pausing, 50).drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ muted: boolean }>('SELECT muted FROM redpoint_user_conv WHERE uid = $1 AND conv = $2', [
      victim?.uid,
      victim?.conv,
    ]);
    expect(written).toEqual(['0', '1']);
    expect(rows.map((r) => r.muted)).toEqual([true]);
    expect((await store.dirty('', 10_000, 'users')).users.filter((m) => m.member.startsWith('moved'))).toEqual([]);
  });

  it('a pass takes what was waiting when it began: a record changed meanwhile waits for the next pass, written once per pass', async () => {
    const { store, pg } = parts();
    await dirtyUsers('pass', 40);
    let victim: string | undefined;
    let changed = false;
    const writes = new Map<string, number>();
    const changing: PgStore = Object.create(pg, {
      writeRecords: {
        value: async (records: readonly PersistedRecord[]) => {
          for (const r of records) writes.set(`${r.uid}|${r.conv}`, (writes.get(`${r.uid}|${r.conv}`) ?? 0) + 1);
          if (!changed) {
            // The first chunk's first record changes before its upsert: its mark moves behind
            // every mark that was waiting.
            changed = true;
            const r = records.find((x) => x.uid.startsWith('pass')) as PersistedRecord;
            victim = `${r.uid}|${r.conv}`;
            await stack.server.ok('PUT', `/v1/users/${r.uid}/conversations/${r.conv}`, { muted: true });
          }
          return pg.writeRecords(records);
        },
      },
    });
    // Chunks of 4, so the pass takes several and the moved mark is behind the ones still waiting.
    const held = (await store.dirty('', 10_000, 'users')).users.length;
    await drainer(store, changing, 4).drainOnce();
    expect(victim).toBeDefined();
    expect(writes.get(victim as string)).toBe(1);
    expect([...writes.values()].reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(held);
    // Its newer state is still marked, and the next pass writes it.
    expect((await store.dirty('', 10_000, 'users')).users.map((m) => m.member)).toContain(victim);
    await drainer(store, changing, 4).drainAll(Date.now() + 20_000);
    expect(writes.get(victim as string)).toBe(2);
    const [uid, conv] = (victim as string).split('|');
    const { rows } = await stack.sql.query<{ muted: boolean }>('SELECT muted FROM redpoint_user_conv WHERE uid = $1 AND conv = $2', [uid, conv]);
    expect(rows.map((r) => r.muted)).toEqual([true]);
  });

  it('a chunk that fails fails the pass and keeps its marks; the chunks that committed are cleared', async () => {
    const { store, pg } = parts();
    await dirtyUsers('fails', 150);
    const marked = (await store.dirty('', 10_000, 'users')).users.filter((m) => m.member.startsWith('fails')).length;
    let calls = 0;
    let failed: string[] = [];
    const failing: PgStore = Object.create(pg, {
      writeRecords: {
        value: async (records: readonly PersistedRecord[]) => {
          if (++calls === 2) {
            failed = records.map((r) => `${r.uid}|${r.conv}`);
            throw new Error('PostgreSQL refused this chunk');
          }
          return pg.writeRecords(records);
        },
      },
    });
    await expect(drainer(store, failing, 50).drainOnce()).rejects.toThrow('PostgreSQL refused this chunk');
    const leftAll = (await store.dirty('', 10_000, 'users')).users.map((m) => m.member);
    const left = leftAll.filter((m) => m.startsWith('fails'));
    expect(failed.length).toBeGreaterThan(0);
    // Every mark of the failed chunk is still there (whichever test's marks it held); at least the
    // first chunk's are gone.
    for (const member of failed) expect(leftAll).toContain(member);
    expect(left.length).toBeLessThan(marked);
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    expect((await storedReads('fails')).size).toBe(300);
  });

  it('ids an array literal would read as NULL are written as text', async () => {
    const { store, pg } = parts();
    await stack.server.members('NULL', { add: ['NULL', 'null', 'a.b'] });
    await stack.server.post({ conv: 'NULL', seq: 4, sender: 'null' });
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ uid: string | null; conv: string | null; last_seq: string }>(
      "SELECT uid, conv, last_seq FROM redpoint_user_conv WHERE conv = 'NULL' ORDER BY uid",
    );
    expect(rows.map((r) => [r.uid, r.conv, Number(r.last_seq)])).toEqual([
      ['NULL', 'NULL', 4],
      ['a.b', 'NULL', 4],
      ['null', 'NULL', 4],
    ]);
  });

  it('a record changed and changed back (A-B-A) while two drainers hold older reads ends in PostgreSQL as in Redis', async () => {
    const { store, pg } = parts();
    await stack.server.members('aba', { add: ['abau', 'abav'] });
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    const mute = (muted: boolean): Promise<unknown> => stack.server.ok('PUT', '/v1/users/abau/conversations/aba', { muted });
    const a = pause();
    const b = pause();
    await mute(true);
    const drainA = drainer(store, heldRecords(pg, 'abau', a.tookNow, a.gate), 50).drainOnce();
    await a.took; // A holds "muted"
    await mute(false);
    const drainB = drainer(store, heldRecords(pg, 'abau', b.tookNow, b.gate), 50).drainOnce();
    await b.took; // B holds "not muted", the newer state
    await mute(true); // back to A's text, at a newer write clock
    a.open();
    await drainA; // A writes its (older) state and clears what it can
    b.open();
    await drainB; // B's "not muted" lands after A's: newer than A's, older than Redis
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ muted: boolean }>("SELECT muted FROM redpoint_user_conv WHERE uid = 'abau' AND conv = 'aba'");
    expect(rows.map((r) => r.muted)).toEqual([true]);
    expect((await store.dirty('', 10_000, 'users')).users.filter((m) => m.member.startsWith('abau'))).toEqual([]);
  });

  it("a drainer's older read of a record landing after another drainer wrote a newer head: PostgreSQL keeps the newer last_seq, and a restore counts every message", async () => {
    const { store, pg } = parts();
    await stack.server.members('lsq', { add: ['lsqa', 'lsqb'] });
    await stack.server.post({ conv: 'lsq', seq: 1, sender: 'lsqb' });
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    const first = pause();
    await stack.server.post({ conv: 'lsq', seq: 2, sender: 'lsqb' });
    const drainA = drainer(store, heldRecords(pg, 'lsqa', first.tookNow, first.gate), 50).drainOnce();
    await first.took; // A holds lsqa's record at head 2
    await stack.server.post({ conv: 'lsq', seq: 3, sender: 'lsqb' });
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000); // B writes head 3 (a newer write clock)
    first.open();
    await drainA; // A's head 2 lands last
    const { rows } = await stack.sql.query<{ last_seq: string; read_seq: string }>(
      "SELECT last_seq, read_seq FROM redpoint_user_conv WHERE uid = 'lsqa' AND conv = 'lsq'",
    );
    expect(rows.map((r) => [Number(r.last_seq), Number(r.read_seq)])).toEqual([[3, 0]]);
    // Redis loses the user; the restore reads PostgreSQL's row.
    const keys = await stack.admin.keys('*{u:lsqa}*');
    expect(keys.length).toBeGreaterThan(0);
    await stack.admin.del(...keys);
    const row = (await stack.server.unread('lsqa')).conversations.find((c) => c.conv === 'lsq');
    expect(row?.unread).toBe(3);
  });

  it('a roster read by one drainer, changed, and drained by another before the first one writes: the older roster does not land over the newer', async () => {
    const { store, pg } = parts();
    await stack.server.members('rro', { add: ['rroa', 'rrob'] });
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    const rosterWrite = pause();
    /** A PgStore whose roster writes of rro announce themselves, then wait for the gate. */
    const held: PgStore = Object.create(pg, {
      writeConversations: {
        value: async (items: ReadonlyArray<{ conv: string; state: unknown }>) => {
          if (items.some((i) => i.conv === 'rro')) {
            rosterWrite.tookNow();
            await rosterWrite.gate;
          }
          return pg.writeConversations(items as Parameters<PgStore['writeConversations']>[0]);
        },
      },
    });
    await stack.server.members('rro', { add: ['rroc'] });
    const first = drainer(store, held, 50).drainOnce();
    await rosterWrite.took; // the first drainer holds the roster {a, b, c}
    await stack.server.members('rro', { add: ['rrod'], remove: ['rroa'] });
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000); // {b, c, d}, a newer generation
    rosterWrite.open();
    await first;
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    expect(await storedMembers(pg, 'rro')).toEqual(['rrob', 'rroc', 'rrod']);
    expect((await store.dirty('', 10_000, 'convs')).convs.filter((m) => m.member.endsWith('|rro'))).toEqual([]);
  });

  it("the reconcile's re-mark paused between reading the write clock and marking: a change, or a change and a drain, in between leaves PostgreSQL as Redis", async () => {
    const { store, pg } = parts();
    await stack.server.members('mkc', { add: ['mku', 'mkv'] });
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    const mute = (muted: boolean): Promise<unknown> => stack.server.ok('PUT', '/v1/users/mku/conversations/mkc', { muted });
    const markOf = async (): Promise<number | undefined> => (await store.dirty('', 10_000, 'users')).users.find((m) => m.member === 'mku|mkc')?.since;
    /** markUser over a client whose read of the meta (the write clock) is answered, then held until `open`. */
    const paused = (): { store: RedisDurableStore; read: Promise<void>; open: () => void } => {
      const deps = (store as unknown as { deps: RedisDurableDeps }).deps;
      const at = pause();
      const client = Object.create(deps.client, {
        hmgetBuffer: {
          value: async (...args: [string, ...string[]]) => {
            const value = await deps.client.hmgetBuffer(...args);
            at.tookNow();
            await at.gate;
            return value;
          },
        },
      }) as RedisDurableDeps['client'];
      return { store: new RedisDurableStore({ ...deps, client }), read: at.took, open: at.open };
    };

    // A change in between: its mark (a newer score) stays as it is, not lowered to the clock read.
    const first = paused();
    const marking = first.store.markUser('mku', ['mkc']);
    await first.read;
    await mute(true);
    const changed = (await store.inspectUser('mku')).w;
    expect(await markOf()).toBe(changed);
    first.open();
    await marking;
    expect(await markOf()).toBe(changed);
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    expect(await markOf()).toBeUndefined();

    // A change and its drain in between: the mark comes back with the older clock; its drain
    // rewrites the same state, which PostgreSQL keeps at the newer version.
    const second = paused();
    const again = second.store.markUser('mku', ['mkc']);
    await second.read;
    await mute(false);
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    second.open();
    await again;
    expect(await markOf()).toBeLessThan((await store.inspectUser('mku')).w);
    await drainer(store, pg, 50).drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ muted: boolean; w: string }>("SELECT muted, w FROM redpoint_user_conv WHERE uid = 'mku' AND conv = 'mkc'");
    expect(rows.map((r) => ({ muted: r.muted, w: Number(r.w) }))).toEqual([{ muted: false, w: (await store.inspectUser('mku')).w }]);
    expect(await markOf()).toBeUndefined();
  });

  it('a meta from before the packed counters keeps its write clock: the next change is marked after it, and the meta is packed again', async () => {
    const { store, pg } = parts();
    await stack.server.members('legw', { add: ['la', 'lb'] });
    await stack.server.post([1, 2].map((seq) => ({ conv: 'legw', seq, sender: 'lb' })));
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
    const [meta = ''] = await stack.admin.keys('*{u:la}:m');
    // A clock ahead of the wall clock: a clock not read from the old fields would start below it.
    const ahead = Date.now() + 3_600_000;
    await setCounter(stack.admin, meta, 'w', ahead);
    expect(await unpackToLegacy(stack.admin, meta)).toBe(true);
    await stack.server.ok('POST', '/v1/users/la/read', { conv: 'legw', seq: 2 });
    const taken = (await store.takeRecords('', 0, 1_000)).filter((r) => r.member === 'la|legw');
    expect(taken.map((r) => r.w)).toEqual([ahead + 1]);
    expect(await readCounter(stack.admin, meta, 'w')).toBe(ahead + 1);
    expect(Object.keys(await stack.admin.hgetall(meta))).not.toContain('w');
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
    const { rows } = await stack.sql.query<{ w: string }>("SELECT w FROM redpoint_user_conv WHERE uid = 'la' AND conv = 'legw'");
    expect(rows.map((r) => Number(r.w))).toEqual([ahead + 1]);
  });

  it("a take's version is its record's last change: an older take landing after a newer one (an operator's reset-read between them) leaves the newer row", async () => {
    const { store, pg } = parts();
    await stack.server.members('vers', { add: ['va', 'vb'] });
    await stack.server.post([1, 2, 3].map((seq) => ({ conv: 'vers', seq, sender: 'vb' })));
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
    await stack.server.ok('POST', '/v1/users/va/read', { conv: 'vers', seq: 3 });
    const older = (await store.takeRecords('', 0, 1_000)).filter((r) => r.member === 'va|vers');
    // readSeq goes down: only the version can tell PostgreSQL which of the two rows is newer.
    await stack.server.ok('PUT', '/v1/users/va/conversations/vers/read', { seq: 1 });
    const newer = (await store.takeRecords('', 0, 1_000)).filter((r) => r.member === 'va|vers');
    expect(older).toHaveLength(1);
    expect(newer).toHaveLength(1);
    const [a, b] = [older[0], newer[0]] as [PersistedRecord, PersistedRecord];
    expect(b.w).toBeGreaterThan(a.w);
    // The mark's score is the user's write clock at that change.
    const [meta] = await stack.admin.keys('*{u:va}:m');
    expect(b.w).toBe(await readCounter(stack.admin, meta ?? '', 'w'));
    await pg.writeRecords([b]);
    await pg.writeRecords([a]);
    expect((await storedReads('va')).get('va|vers')).toBe(1);
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
  });

  it('a burst of rosters does not hold a pass: it spends a bounded time on them, leaves the rest marked, and the records drain', async () => {
    const { store, pg } = parts();
    await dirtyUsers('burst', 60);
    const slowPg: PgStore = Object.create(pg, {
      writeConversations: {
        value: async (items: Parameters<PgStore['writeConversations']>[0]) => {
          await new Promise((resolve) => setTimeout(resolve, 100));
          return pg.writeConversations(items);
        },
      },
    });
    // 12 batches of 5 rosters at 100 ms each would hold the pass for 1.2 s: it stops at its bound (250 ms).
    const slow = drainer(store, slowPg, 1_000, { rosters: 5, members: 1_000 });
    await slow.drainOnce();
    const left = await store.dirty('', 1_000);
    expect(left.users.filter((m) => m.member.startsWith('burst'))).toEqual([]);
    expect(left.convs.filter((m) => m.member.startsWith('m|burst')).length).toBeGreaterThan(0);
    await slow.drainAll(Date.now() + 20_000);
    expect((await store.backlog([''])).marks).toBe(0);
    const { rows } = await stack.sql.query<{ n: string }>("SELECT count(*) AS n FROM redpoint_conv_members WHERE conv LIKE 'burstc%'");
    expect(Number(rows[0]?.n)).toBe(120);
  });

  it('a roster batch chosen as a deadlock victim runs again (a batch and an erasure can cross on two of one user’s memberships)', async () => {
    const { store, pg } = parts();
    await stack.server.members('dl-c1', { add: ['dl-u', 'dl-p'] });
    await stack.server.members('dl-c2', { add: ['dl-u', 'dl-q'] });
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
    const c1 = await store.readConversation('dl-c1');
    const c2 = await store.readConversation('dl-c2');
    if (!c1 || !c2) throw new Error('no conversation to read');
    // Another transaction (as an erasure of dl-u would) holds dl-u's row in dl-c2, then asks for
    // its row in dl-c1, which the batch holds by then: PostgreSQL aborts the first to wait, the batch.
    await stack.sql.query('BEGIN');
    await stack.sql.query("UPDATE redpoint_conv_members SET join_head = join_head WHERE conv = 'dl-c2' AND uid = 'dl-u'");
    const batch = pg.writeConversations([
      { conv: 'dl-c1', state: c1.state },
      { conv: 'dl-c2', state: c2.state },
    ]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const other = stack.sql.query("UPDATE redpoint_conv_members SET join_head = join_head WHERE conv = 'dl-c1' AND uid = 'dl-u'");
    await other;
    await stack.sql.query('COMMIT');
    await expect(batch).resolves.toBeUndefined();
    expect(await storedMembers(pg, 'dl-c1')).toEqual(['dl-p', 'dl-u']);
    expect(await storedMembers(pg, 'dl-c2')).toEqual(['dl-q', 'dl-u']);
  });

  it("heads chosen as a deadlock's victim are written again (two drainers' passes cross on the same conversations)", async () => {
    const { store, pg } = parts();
    await stack.server.members('hd-c1', { add: ['hd-u', 'hd-p'] });
    await stack.server.members('hd-c2', { add: ['hd-u', 'hd-q'] });
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
    // Another writer (a second drainer's heads or rosters) holds hd-c2's row, then asks for
    // hd-c1's, which the heads' upsert holds by then: PostgreSQL aborts the first to wait, the heads.
    // Heads as a drainer reads them: with the generation read with them.
    const gen = async (conv: string): Promise<number> => Number((await store.readConversation(conv))?.gen);
    const [gen1, gen2] = [await gen('hd-c1'), await gen('hd-c2')];
    await stack.sql.query('BEGIN');
    await stack.sql.query("UPDATE redpoint_conversations SET max_seq = max_seq WHERE conv = 'hd-c2'");
    const heads = pg.writeHeads([
      { conv: 'hd-c1', maxSeq: 7, gen: gen1 },
      { conv: 'hd-c2', maxSeq: 8, gen: gen2 },
    ]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await stack.sql.query("UPDATE redpoint_conversations SET max_seq = max_seq WHERE conv = 'hd-c1'");
    await stack.sql.query('COMMIT');
    await expect(heads).resolves.toBeUndefined();
    const saved = await pg.loadConversations(['hd-c1', 'hd-c2']);
    expect([saved.get('hd-c1')?.maxSeq, saved.get('hd-c2')?.maxSeq]).toEqual([7, 8]);
  });

  it('a batch of rosters: each written as alone, bounded by its members too', async () => {
    const { store, pg } = parts();
    // Four conversations: one replaced (a member left), one whose stored generation is newer (only
    // its head may rise), one deleted since it was read (its tombstone wins), one new.
    await stack.server.members('rb-keep', { add: ['rb-a', 'rb-b', 'rb-c'] });
    await stack.server.members('rb-newer', { add: ['rb-a', 'rb-b'] });
    await stack.server.members('rb-gone', { add: ['rb-a', 'rb-b'] });
    await stack.server.post([
      { conv: 'rb-keep', seq: 4, sender: 'rb-a' },
      { conv: 'rb-newer', seq: 2, sender: 'rb-a' },
      { conv: 'rb-gone', seq: 1, sender: 'rb-a' },
    ]);
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
    const oldNewer = await store.readConversation('rb-newer');
    const oldGone = await store.readConversation('rb-gone');
    if (!oldNewer || !oldGone) throw new Error('no conversation to read');
    await stack.server.members('rb-keep', { remove: ['rb-c'] });
    await stack.server.members('rb-newer', { add: ['rb-d'] });
    await stack.server.post({ conv: 'rb-newer', seq: 9, sender: 'rb-a' });
    await stack.server.members('rb-new', { add: ['rb-x', 'rb-y'] });
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
    await stack.server.ok('DELETE', '/v1/conversations/rb-gone');
    await drainer(store, pg, 1_000).drainAll(Date.now() + 20_000);
    const keep = await store.readConversation('rb-keep');
    const fresh = await store.readConversation('rb-new');
    if (!keep || !fresh) throw new Error('no conversation to read');
    // The stale reads of rb-newer (an older generation, given a head above the stored 9: a head
    // read before a rebase lowered it) and of rb-gone (before its deletion), in one batch with
    // the current ones.
    await pg.writeConversations([
      { conv: 'rb-newer', state: { ...oldNewer.state, maxSeq: 12 } },
      { conv: 'rb-gone', state: oldGone.state },
      { conv: 'rb-keep', state: keep.state },
      { conv: 'rb-new', state: fresh.state },
    ]);
    const saved = await pg.loadConversations(['rb-keep', 'rb-newer', 'rb-gone', 'rb-new']);
    expect(await storedMembers(pg, 'rb-keep')).toEqual(['rb-a', 'rb-b']);
    expect(saved.get('rb-keep')?.maxSeq).toBe(4);
    // The older generation's roster did not replace the newer one, nor did its head: the stored
    // head was read at the newer generation (pg-store.ts headAt).
    expect(await storedMembers(pg, 'rb-newer')).toEqual(['rb-a', 'rb-b', 'rb-d']);
    expect(saved.get('rb-newer')?.maxSeq).toBe(9);
    expect(saved.has('rb-gone')).toBe(false);
    const gone = await stack.sql.query("SELECT uid FROM redpoint_conv_members WHERE conv = 'rb-gone'");
    expect(gone.rows).toEqual([]);
    expect(await storedMembers(pg, 'rb-new')).toEqual(['rb-x', 'rb-y']);

    // Rosters are read 8 at a time while a batch fills; with a bound of 12 members, 10 rosters of 2
    // go in a batch of the first 8 (16 members: the bound is passed), then one of the last 2. With
    // a bound of 20 rosters but only 4 per batch, batches of 4, 4, 2.
    const written: string[][] = [];
    const spy: PgStore = Object.create(pg, {
      writeConversations: {
        value: (items: Parameters<PgStore['writeConversations']>[0]) => {
          written.push(items.map((i) => i.conv).filter((c) => c.startsWith('rb-m')));
          return pg.writeConversations(items);
        },
      },
    });
    const rosters = (tag: string) => Promise.all(Array.from({ length: 10 }, (_, i) => stack.server.members(`rb-m${tag}${i}`, { add: ['rb-1', 'rb-2'] })));
    await rosters('a');
    await drainer(store, spy, 1_000, { rosters: 200, members: 12 }).drainAll(Date.now() + 20_000);
    expect(written.filter((b) => b.length > 0).map((b) => b.length)).toEqual([8, 2]);
    written.length = 0;
    await rosters('b');
    await drainer(store, spy, 1_000, { rosters: 4, members: 20_000 }).drainAll(Date.now() + 20_000);
    expect(written.filter((b) => b.length > 0).map((b) => b.length)).toEqual([4, 4, 2]);
    expect(await storedMembers(pg, 'rb-mb9')).toEqual(['rb-1', 'rb-2']);
  });
});
