import { describe, expect, it } from 'vitest';
import { dbReconcileCommand } from '../../server/cli/db-reconcile-command.js';
import type { ReconcileArgs } from '../../server/cli/reconcile-command.js';
import { restoreCommand } from '../../server/cli/restore-command.js';
import type { DbReconcilePage } from '../../server/durable/db-reconcile.js';
import { readCounter, setCounter } from '../helpers/user-meta.js';
import { durableStack } from './stack.js';

/**
 * The operator's durable-tier commands on a real Redis and PostgreSQL, as the CLI runs them
 * (their own engine and tier from the environment, beside a running server):
 * `redpoint restore` and `redpoint reconcile --against-db [--repair]`. Each divergence is made by
 * hand the way a real fault leaves it: a lost dirty mark, a Redis that lost its last writes
 * while keeping the user (a failover to a lagging replica), a row missing from PostgreSQL.
 */
describe('durable tier: redpoint restore and reconcile --against-db', () => {
  // The CLI's engine uses the production prefix; the server shares it.
  const stack = durableStack('cli', [{ redisPrefix: 'rp', durable: { run: false } }]);
  const env = (): NodeJS.ProcessEnv => ({ REDIS_URL: stack.redis.url, DATABASE_URL: stack.databaseUrl });

  const drain = (): Promise<void> => stack.server.durable?.persister.drainAll(Date.now() + 20_000) ?? Promise.resolve();
  const args = (over: Partial<ReconcileArgs>): ReconcileArgs => ({
    users: [],
    convs: [],
    all: true,
    repair: false,
    rate: 100_000,
    graceMs: 0,
    cursor: '',
    json: true,
    progress: false,
    ...over,
  });
  const reconcile = async (over: Partial<ReconcileArgs>): Promise<{ code: number; report: DbReconcilePage }> => {
    let text = '';
    const code = await dbReconcileCommand(
      args(over),
      (t) => void (text += t),
      () => false,
      env(),
    );
    return { code, report: JSON.parse(text) as DbReconcilePage };
  };
  const kinds = (report: DbReconcilePage): string[] => report.findings.map((f) => `${f.kind}:${f.uid ?? ''}:${f.conv}`).sort();
  const record = (uid: string, conv: string): Promise<string | null> => stack.admin.hget(`rp:{u:${uid}}:c`, conv);

  it('a store where both agree: no findings, exit 0', async () => {
    await stack.server.members('agree', { add: ['xa', 'xb'], category: 'work' });
    await stack.server.post([
      { conv: 'agree', seq: 1, sender: 'xa', mentions: ['xb'] },
      { conv: 'agree', seq: 2, sender: 'xa' },
    ]);
    await stack.server.ok('PUT', '/v1/users/xb/conversations/agree', { muted: true });
    await drain();
    const { code, report } = await reconcile({});
    expect(kinds(report)).toEqual([]);
    expect(report.users).toBeGreaterThanOrEqual(2);
    expect(report.conversations).toBeGreaterThanOrEqual(1);
    expect(code).toBe(0);
  });

  it('PostgreSQL behind: a change whose dirty mark was lost is found, and --repair marks it again so the drainer writes it', async () => {
    await stack.server.members('lostmark', { add: ['la', 'lb'] });
    await stack.server.post({ conv: 'lostmark', seq: 1, sender: 'la' });
    await drain();
    await stack.server.ok('POST', '/v1/users/lb/read', { conv: 'lostmark', seq: 1 });
    // The mark the read left is lost (a failover that kept the write but not the mark, a bug).
    expect(await stack.admin.zrem('rp:d', 'lb|lostmark')).toBe(1);
    expect(kinds((await reconcile({ users: ['lb'], all: false })).report)).toEqual(['db-behind:lb:lostmark']);

    const repaired = await reconcile({ users: ['lb'], all: false, repair: true });
    expect(repaired.code).toBe(0);
    expect(repaired.report.repaired.map((f) => f.kind)).toEqual(['db-behind']);
    await drain();
    const { rows } = await stack.sql.query("SELECT read_seq FROM redpoint_user_conv WHERE uid = 'lb' AND conv = 'lostmark'");
    expect(rows[0]?.read_seq).toBe('1');
    expect(kinds((await reconcile({ users: ['lb'], all: false })).report)).toEqual([]);
  });

  it('PostgreSQL behind by a rejoin: its older deletion is not taken as Redis behind, and --repair does not hide the conversation', async () => {
    await stack.server.members('rejoined', { add: ['ka', 'kb'] });
    await stack.server.post({ conv: 'rejoined', seq: 1, sender: 'ka' });
    await stack.server.ok('DELETE', '/v1/users/kb/conversations/rejoined');
    await stack.server.members('rejoined', { remove: ['kb'] });
    await drain();
    await stack.server.members('rejoined', { add: ['kb'] });
    await stack.server.post({ conv: 'rejoined', seq: 2, sender: 'ka' });
    // The rejoin's mark is lost: PostgreSQL still holds the old membership, deleted at 1.
    expect(await stack.admin.zrem('rp:d', 'kb|rejoined')).toBe(1);
    expect(kinds((await reconcile({ users: ['kb'], all: false })).report)).toEqual(['db-behind:kb:rejoined']);

    await reconcile({ users: ['kb'], all: false, repair: true });
    await drain();
    expect((await stack.server.unread('kb')).conversations.find((c) => c.conv === 'rejoined')).toMatchObject({ lastSeq: 2, unread: 1 });
    const { rows } = await stack.sql.query("SELECT member, deleted_seq FROM redpoint_user_conv WHERE uid = 'kb' AND conv = 'rejoined'");
    expect(rows[0]).toEqual({ member: true, deleted_seq: '-1' });
    expect(kinds((await reconcile({ users: ['kb'], all: false })).report)).toEqual([]);
  });

  it('Redis behind: a user Redis kept but whose last writes it lost gets them back from PostgreSQL with --repair', async () => {
    await stack.server.members('lagging', { add: ['ra', 'rb'] });
    await stack.server.post([1, 2, 3, 4].map((seq) => ({ conv: 'lagging', seq, sender: 'ra' })));
    await drain();
    const meta = `rp:{u:rb}:m`;
    const oldRecord = await record('rb', 'lagging');
    const oldClock = await readCounter(stack.admin, meta, 'w');
    const oldUnread = (await stack.server.unread('rb')).total;
    // The writes a failover to a lagging replica loses: a read and a mute, drained to PostgreSQL...
    await stack.server.ok('POST', '/v1/users/rb/read', { conv: 'lagging', seq: 3 });
    await stack.server.ok('PUT', '/v1/users/rb/conversations/lagging', { muted: true });
    await drain();
    // ...then gone from Redis, the user's record and clock as they were before them.
    await stack.admin.hset(`rp:{u:rb}:c`, 'lagging', oldRecord ?? '');
    await setCounter(stack.admin, meta, 'w', oldClock);
    expect(kinds((await reconcile({ users: ['rb'], all: false })).report)).toEqual(['redis-behind:rb:lagging']);

    const repaired = await reconcile({ users: ['rb'], all: false, repair: true });
    expect(repaired.report.repaired.map((f) => f.kind)).toEqual(['redis-behind']);
    const view = (await stack.server.unread('rb')).conversations.find((c) => c.conv === 'lagging');
    expect(view).toMatchObject({ readSeq: 3, unread: 1, muted: true });
    expect(oldUnread).toBe(4);
    await drain();
    expect(kinds((await reconcile({ users: ['rb'], all: false })).report)).toEqual([]);
  });

  it('Redis behind by an "unread from here" it lost (a lower readSeq, a newer read generation): found by the generation, repaired whatever the clocks say', async () => {
    await stack.server.members('unlost', { add: ['ua', 'ub'] });
    await stack.server.post([1, 2, 3, 4, 5].map((seq) => ({ conv: 'unlost', seq, sender: 'ub', ...(seq === 3 ? { mentions: ['ua'] } : {}) })));
    await stack.server.ok('POST', '/v1/users/ua/read', { conv: 'unlost', seq: 5 });
    await drain();
    const oldRecord = await record('ua', 'unlost');
    await stack.server.ok('POST', '/v1/users/ua/conversations/unlost/unread-from', { seq: 2, gen: 1 });
    await drain();
    // Redis loses the act but keeps its clock (a newer write clock than PostgreSQL's row).
    await stack.admin.hset(`rp:{u:ua}:c`, 'unlost', oldRecord ?? '');
    expect((await stack.server.unread('ua')).conversations.find((c) => c.conv === 'unlost')).toMatchObject({ readSeq: 5, unread: 0 });
    expect(kinds((await reconcile({ users: ['ua'], all: false })).report)).toEqual(['redis-behind:ua:unlost']);
    await reconcile({ users: ['ua'], all: false, repair: true });
    expect((await stack.server.unread('ua')).conversations.find((c) => c.conv === 'unlost')).toMatchObject({ readSeq: 1, unread: 4, mentions: 1 });
    await drain();
    expect(kinds((await reconcile({ users: ['ua'], all: false })).report)).toEqual([]);
  });

  it('Redis behind by a whole record (lost with the join), and PostgreSQL missing a record: both found and repaired', async () => {
    await stack.server.members('lostjoin', { add: ['ja', 'jb'] });
    await stack.server.post([1, 2].map((seq) => ({ conv: 'lostjoin', seq, sender: 'ja' })));
    await stack.server.ok('POST', '/v1/users/jb/read', { conv: 'lostjoin', seq: 1 });
    await drain();
    // jb's record and clock go back to before the join; ja's row goes from PostgreSQL (mark lost too).
    await stack.admin.hdel(`rp:{u:jb}:c`, 'lostjoin');
    await setCounter(stack.admin, `rp:{u:jb}:m`, 'w', 1);
    await stack.sql.query("DELETE FROM redpoint_user_conv WHERE uid = 'ja' AND conv = 'lostjoin'");
    const found = await reconcile({});
    expect(kinds(found.report)).toEqual(['db-missing:ja:lostjoin', 'redis-missing:jb:lostjoin']);
    expect(found.code).toBe(1);

    const repaired = await reconcile({ repair: true });
    expect(repaired.report.unrepaired).toEqual([]);
    expect(repaired.code).toBe(0);
    const decoded = await record('jb', 'lostjoin');
    expect(decoded).not.toBeNull();
    expect((await stack.server.unread('jb')).conversations.find((c) => c.conv === 'lostjoin')).toMatchObject({ readSeq: 1, lastSeq: 2, unread: 1 });
    await drain();
    expect(kinds((await reconcile({})).report)).toEqual([]);
  });

  it("a conversation's head: behind in Redis is raised, behind in PostgreSQL is marked again", async () => {
    await stack.server.members('heads', { add: ['ha', 'hb'] });
    await stack.server.post([1, 2, 3].map((seq) => ({ conv: 'heads', seq, sender: 'ha' })));
    await drain();
    await stack.admin.hset('rp:{c:heads}', '#s', '1');
    expect(kinds((await reconcile({})).report)).toContain('head-behind::heads');
    await reconcile({ repair: true });
    expect(await stack.admin.hget('rp:{c:heads}', '#s')).toBe('3');

    await stack.server.post({ conv: 'heads', seq: 4, sender: 'ha' });
    await stack.admin.zrem('rp:dc', 'h|heads');
    expect(kinds((await reconcile({})).report)).toContain('db-head-behind::heads');
    await reconcile({ repair: true });
    await drain();
    const { rows } = await stack.sql.query("SELECT max_seq FROM redpoint_conversations WHERE conv = 'heads'");
    expect(rows[0]?.max_seq).toBe('4');
  });

  // A topic's child keeps the parent generation of the newest roster synced into it ('#P',
  // PostgreSQL parent_gen), written with the roster: a lost roster mark, or a Redis that lost the raise.
  it("a topic child's parent generation: behind in PostgreSQL is marked again, behind in Redis is reported", async () => {
    await stack.server.members('parents', { add: ['pa', 'pb'] });
    await stack.server.post({ conv: 'parents', topic: 'x', seq: 1, sender: 'pa' });
    await drain();
    const child = 'parents#t:x';
    const held = Number(await stack.admin.hget(`rp:{c:${child}}`, '#P'));
    expect(held).toBeGreaterThan(0);
    expect(kinds((await reconcile({})).report)).toEqual([]);

    // A sync that raised '#P' alone, its roster mark lost.
    await stack.admin.hset(`rp:{c:${child}}`, '#P', String(held + 5));
    expect(kinds((await reconcile({})).report)).toEqual([`db-parent-behind::${child}`]);
    const repaired = await reconcile({ repair: true });
    expect(repaired.report.unrepaired).toEqual([]);
    await drain();
    const { rows } = await stack.sql.query(`SELECT parent_gen FROM redpoint_conversations WHERE conv = '${child}'`);
    expect(rows[0]?.parent_gen).toBe(String(held + 5));
    expect(kinds((await reconcile({})).report)).toEqual([]);

    // Redis lost the raise PostgreSQL holds.
    await stack.admin.hset(`rp:{c:${child}}`, '#P', String(held));
    expect(kinds((await reconcile({})).report)).toEqual([`redis-parent-behind::${child}`]);
    const unrepaired = await reconcile({ repair: true });
    expect(unrepaired.report.unrepaired.map((f) => f.kind)).toEqual(['redis-parent-behind']);
    expect(unrepaired.code).toBe(1);
  });

  it('redpoint restore warms every user PostgreSQL holds after a FLUSHALL and marks Redis intact', async () => {
    await drain();
    const { rows } = await stack.sql.query<{ n: string }>('SELECT count(DISTINCT uid) AS n FROM redpoint_user_conv');
    const users = Number(rows[0]?.n);
    await stack.admin.flushall();
    let text = '';
    const code = await restoreCommand(
      { rate: 100_000, json: true, progress: false },
      (t) => void (text += t),
      () => false,
      env(),
    );
    expect(code).toBe(0);
    const report = JSON.parse(text) as { users: number; restored: number; markedIntact: boolean };
    expect(report).toMatchObject({ users, restored: users, markedIntact: true });
    expect(await stack.admin.exists('rp:ok')).toBe(1);
    expect(await stack.admin.exists('rp:{u:xb}:m')).toBe(1);
    // Restored exactly: the reconcile finds Redis and PostgreSQL in agreement.
    expect(kinds((await reconcile({})).report)).toEqual([]);
  });
});
