import { describe, expect, it } from 'vitest';
import type { PgReadPositions } from '../../server/durable/pg-read-positions.js';
import { mutedMentionsKey } from '../../server/engine/redis/keys.js';
import type { TestServer } from '../helpers/test-server.js';
import { deferred } from '../sync/interleavings.js';
import { durableStack } from './stack.js';

type Setting = 'shareReads' | 'mutedMentions';
const SAVE: Record<Setting, 'saveSharing' | 'saveMutedMentions'> = { shareReads: 'saveSharing', mutedMentions: 'saveMutedMentions' };
const LOAD: Record<Setting, 'loadSharing' | 'loadMutedMentions'> = { shareReads: 'loadSharing', mutedMentions: 'loadMutedMentions' };

/**
 * A user's settings (PROTOCOL.md "Read receipts", "Notification levels") written by two
 * processes of one deployment at once. Each write goes to PostgreSQL, then to Redis: one process
 * held between the two while the other writes both must not leave Redis serving one value and
 * PostgreSQL holding the other, or the setting flips by itself the day Redis loses the key.
 */
describe('durable tier: one user setting changed by two processes at once', () => {
  const stack = durableStack('usersettings', [
    { redisPrefix: 'us', durable: { run: false } },
    { redisPrefix: 'us', durable: { run: false } },
  ]);

  const pgOf = (server: TestServer): PgReadPositions => {
    const pg = server.durable?.tier.pg.readPositions;
    if (!pg) throw new Error('no durable tier');
    return pg;
  };

  /**
   * Process A's next call of `method` (a setting's save to PostgreSQL, or its load when Redis lost
   * the key) waits, once PostgreSQL answered, until released.
   */
  function holdAfter(server: TestServer, method: (typeof SAVE)[Setting] | (typeof LOAD)[Setting]): { answered: Promise<void>; release: () => void } {
    const pg = pgOf(server) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const original = pg[method];
    if (!original) throw new Error(`PgReadPositions has no ${method}`);
    const answered = deferred();
    const release = deferred();
    pg[method] = async (...args: unknown[]): Promise<unknown> => {
      pg[method] = original;
      const reply = await original.apply(pg, args);
      answered.resolve();
      await release.promise;
      return reply;
    };
    return { answered: answered.promise, release: release.resolve };
  }

  const served = async (server: TestServer, uid: string, setting: Setting): Promise<boolean> =>
    (await server.ok<Record<Setting, boolean>>('GET', `/v1/users/${uid}/settings`))[setting];

  for (const setting of ['shareReads', 'mutedMentions'] as const) {
    // Turning it on (mutedMentions) or off (shareReads) is the change from the default.
    const changed = setting === 'mutedMentions';
    it(`${setting}: A writes PostgreSQL, B writes both, A writes Redis: both processes and a restore after Redis loses it agree`, async () => {
      const [a, b] = stack.servers as [TestServer, TestServer];
      const uid = `us-${setting}`;
      const held = holdAfter(a, SAVE[setting]);
      const writing = a.ok('PUT', `/v1/users/${uid}/settings`, { [setting]: changed });
      await held.answered;
      await b.ok('PUT', `/v1/users/${uid}/settings`, { [setting]: !changed });
      held.release();
      await writing;

      const fromRedis = [await served(a, uid, setting), await served(b, uid, setting)];
      expect(fromRedis[0]).toBe(fromRedis[1]);
      // Redis loses the key: what comes back from PostgreSQL is what was served.
      await stack.admin.flushall();
      expect(await served(b, uid, setting), `served ${fromRedis[0]} before Redis lost it`).toBe(fromRedis[0]);
    });

    it(`${setting}: A reads it back from PostgreSQL (Redis lost it) while B changes it: A does not put the older value back`, async () => {
      const [a, b] = stack.servers as [TestServer, TestServer];
      const uid = `us-back-${setting}`;
      await b.ok('PUT', `/v1/users/${uid}/settings`, { [setting]: !changed });
      await stack.admin.flushall();
      const held = holdAfter(a, LOAD[setting]);
      const reading = served(a, uid, setting);
      await held.answered;
      await b.ok('PUT', `/v1/users/${uid}/settings`, { [setting]: changed });
      held.release();
      // The read began before the change: either answer is right for it, but not for what follows.
      await reading;
      expect([await served(a, uid, setting), await served(b, uid, setting)]).toEqual([changed, changed]);
      await stack.admin.flushall();
      expect(await served(a, uid, setting)).toBe(changed);
    });
  }

  it('a setting Redis holds without a revision (written before schema 14) is taken over by the next write', async () => {
    const uid = 'us-old';
    await stack.admin.set(mutedMentionsKey('us', uid), '1');
    expect(await served(stack.server, uid, 'mutedMentions')).toBe(true);
    await stack.servers[1]?.ok('PUT', `/v1/users/${uid}/settings`, { mutedMentions: false });
    expect(await served(stack.server, uid, 'mutedMentions')).toBe(false);
  });
});
