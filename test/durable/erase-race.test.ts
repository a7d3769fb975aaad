import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgStore } from '../../server/durable/pg-store.js';
import { migrate } from '../../server/durable/schema.js';
import type { StoredConv } from '../../server/engine/rules.js';
import { encodeRecord } from '../../server/engine/state-text.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';

const record = (conv: string, lastSeq: number): StoredConv => ({
  conv,
  member: true,
  lastSeq,
  readSeq: 1,
  mentionSeqs: [],
  muted: false,
  markedUnread: false,
  category: 'default',
  large: false,
  deletedSeq: 0,
  gen: 1,
  joinGen: 1,
  readGen: 0,
  readMentionSeqs: [],
  mentionsOnly: false,
  at: 0,
  nocountSeqs: [],
});

/**
 * An erase racing a drain pass in flight: the pass read the user from Redis before the erase
 * and writes to PostgreSQL after it. The erased rows must stay erased; a user created again
 * after the erase (a later write clock) is written as usual.
 */
describe('durable tier: an erase racing a drain pass', () => {
  let postgres: PostgresServer;
  let store: PgStore;

  beforeAll(async () => {
    postgres = await startPostgres();
    store = PgStore.connect(await postgres.createDatabase('erase'));
    await migrate(store.pool);
  });
  afterAll(async () => {
    await store?.close();
    await postgres?.stop();
  });

  const rows = async (uid: string): Promise<number> =>
    Number((await store.pool.query<{ n: string }>('SELECT count(*) AS n FROM redpoint_user_conv WHERE uid = $1', [uid])).rows[0]?.n);

  it('a state read before the erase and written after it does not bring the rows back', async () => {
    const readAt = Date.now();
    const snapshot = { uid: 'gone', conv: 'c1', w: readAt, text: encodeRecord(record('c1', 5)) };
    await store.writeRecords([snapshot]);
    expect(await rows('gone')).toBe(1);
    await store.eraseUser('gone', readAt + 5);
    // The pass in flight, late: same snapshot (or one read a moment later, still before the erase).
    await store.writeRecords([snapshot, { ...snapshot, w: readAt + 4 }]);
    expect(await rows('gone')).toBe(0);
    expect((await store.loadUsers(['gone'])).size).toBe(0);
  });

  it('a user created again after the erase is persisted', async () => {
    const erasedAt = Date.now();
    await store.eraseUser('again', erasedAt);
    await store.writeRecords([{ uid: 'again', conv: 'c2', w: erasedAt + 1, text: encodeRecord(record('c2', 2)) }]);
    expect(await rows('again')).toBe(1);
    // Erased twice: the newer tombstone holds.
    await store.eraseUser('again', erasedAt + 10);
    await store.writeRecords([{ uid: 'again', conv: 'c2', w: erasedAt + 9, text: encodeRecord(record('c2', 3)) }]);
    expect(await rows('again')).toBe(0);
  });
});
