import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BadgeMarks } from '../../server/engine/badge-marks.js';
import type { Engine } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';

/**
 * The store's side of the badge hook (server/engine/badge-marks.ts), the same on every engine:
 * the user step marks, a claim is exclusive until released or expired, a mark set during a claim
 * waits for the release and then for the interval, a retry is due at its time, a taken-over
 * claim's release changes nothing, a read-diffused head move marks the conversation once per
 * interval. Without the hook (badgeMarks off) nothing is marked.
 */
const OPTIONS = { snapshotEvery: 10, streamMaxLen: 100 };
let prefixes = 0;

type Make = (badgeMarks: boolean) => Promise<Engine>;

/** `probeMs`: how long a new slot's marks may wait for a Redis Cluster's next probe of its slots (redis-badge-marks.ts). */
function suite(name: string, make: () => Make, probeMs = 0): void {
  describe(`badge marks on ${name}`, () => {
    const engines: Engine[] = [];
    const open = async (badgeMarks = true): Promise<{ engine: Engine; sync: SyncService; marks: BadgeMarks }> => {
      const engine = await make()(badgeMarks);
      engines.push(engine);
      return { engine, sync: new SyncService(engine, { largeGroupThreshold: 3 }), marks: engine.badgeMarks() };
    };
    afterAll(async () => {
      await Promise.all(engines.map((e) => e.close()));
    });

    it('marks the users a message changed, one claim each, exclusive until released', async () => {
      const { sync, marks } = await open();
      await sync.changeMembers('c', { add: ['a', 'b'], remove: [] });
      await sync.postMessages([{ conv: 'c', seq: 1, sender: 'b' }]);
      const now = Date.now() + 1;
      const first = await marks.claimUsers(now, 10_000, 100);
      expect(first.map((c) => c.uid).sort()).toEqual(['a', 'b']);
      expect(first.every((c) => c.delivered === null && c.lease === now + 10_000)).toBe(true);
      // A change while `a` is claimed: no second claim of `a` until the first is released.
      await sync.postMessages([{ conv: 'c', seq: 2, sender: 'b' }]);
      expect((await marks.claimUsers(now + 1, 10_000, 100)).map((c) => c.uid)).toEqual([]);
      const a = first.find((c) => c.uid === 'a');
      const b = first.find((c) => c.uid === 'b');
      if (!a || !b) throw new Error('claims missing');
      await marks.release(a, { kind: 'delivered', delivered: { seq: 7, badge: '{"total":1}' }, coolUntil: now + 500 });
      await marks.release(b, { kind: 'delivered', delivered: { seq: 3, badge: '{"total":0}' }, coolUntil: now + 500 });
      // The mark left during the claim is due at the interval's end, not before.
      expect(await marks.claimUsers(now + 499, 10_000, 100)).toEqual([]);
      const again = await marks.claimUsers(now + 500, 10_000, 100);
      expect(again.map((c) => [c.uid, c.delivered]).sort()).toEqual([
        ['a', { seq: 7, badge: '{"total":1}' }],
        ['b', { seq: 3, badge: '{"total":0}' }],
      ]);
    });

    it('a crashed drainer’s claim expires and its user is claimed again; its late release changes nothing', async () => {
      const { sync, marks } = await open();
      await sync.changeMembers('d', { add: ['x', 'y'], remove: [] });
      await sync.postMessages([{ conv: 'd', seq: 1, sender: 'y' }]);
      const now = Date.now() + 1;
      const lost = (await marks.claimUsers(now, 100, 100)).find((c) => c.uid === 'x');
      expect(lost).toBeDefined();
      expect((await marks.claimUsers(now + 99, 100, 100)).map((c) => c.uid)).not.toContain('x');
      const taken = (await marks.claimUsers(now + 100, 5_000, 100)).find((c) => c.uid === 'x');
      expect(taken?.lease).toBe(now + 5_100);
      if (!lost || !taken) throw new Error('claims missing');
      // The first holder comes back and releases: the new holder's claim stands.
      await marks.release(lost, { kind: 'delivered', delivered: { seq: 1, badge: 'old' }, coolUntil: now });
      expect((await marks.claimUsers(now + 200, 5_000, 100)).map((c) => c.uid)).not.toContain('x');
      await marks.release(taken, { kind: 'retry', at: now + 1_000 });
      expect((await marks.claimUsers(now + 999, 5_000, 100)).map((c) => c.uid)).not.toContain('x');
      const retried = (await marks.claimUsers(now + 1_000, 5_000, 100)).find((c) => c.uid === 'x');
      expect(retried?.delivered).toBeNull();
    });

    it('a read-diffused group’s head move marks the conversation, taken once per interval; its members are marked by the drainer', async () => {
      const { sync, marks } = await open();
      await sync.changeMembers('big', { add: ['m1', 'm2', 'm3', 'm4'], remove: [] });
      // The membership change itself marked its members (their records changed): clear them.
      await marks.claimUsers(Date.now() + 1, 1, 1_000);
      await sync.postMessages([{ conv: 'big', seq: 1, sender: 'm1' }]);
      // The conversation's slot held no mark at the claim's probe above.
      await new Promise((resolve) => setTimeout(resolve, probeMs));
      // Times from here on are after every mark (a cluster's claim above takes a while).
      const now = Date.now() + 1;
      expect(await marks.takeConversations(now + 10, now + 1_000, 10)).toEqual(['big']);
      await sync.postMessages([{ conv: 'big', seq: 2, sender: 'm1' }]);
      expect(await marks.takeConversations(now + 20, now + 1_020, 10)).toEqual([]);
      // After the interval, and after the second head move's mark (a loaded machine may take a while).
      const later = Math.max(now + 1_000, Date.now() + 1);
      expect(await marks.takeConversations(later, later + 1_000, 10)).toEqual(['big']);
      await marks.markUsers(['m3', 'm4'], later);
      const claimed = (await marks.claimUsers(later + 1, 5_000, 100)).map((c) => c.uid);
      expect(claimed).toEqual(expect.arrayContaining(['m3', 'm4']));
    });

    it('socket-less only: a user some process holds a socket of is put off; its last socket closing, or a lapsed entry, makes it due', async () => {
      const { sync, marks } = await open();
      await sync.changeMembers('sl', { add: ['u', 'v', 'w'], remove: [] });
      await sync.postMessages([{ conv: 'sl', seq: 1, sender: 'w' }]);
      const now = Date.now() + 1;
      const only = { socketlessOnly: true };
      await marks.setPresence('p1', ['u'], now + 30_000, now);
      await marks.setPresence('p2', ['u'], now + 20_000, now);
      await marks.setPresence('p3', ['v'], now + 10_000, now);
      const first = (await marks.claimUsers(now, 50, 100, only)).map((c) => c.uid);
      expect(first).toContain('w');
      expect(first).not.toContain('u');
      expect(first).not.toContain('v');
      // One process closes its socket: another still holds one.
      await marks.setPresence('p1', ['u'], null, now + 1);
      expect((await marks.claimUsers(now + 2, 50, 100, only)).map((c) => c.uid)).not.toContain('u');
      // The last one closes: due now. v's entry lapses at now + 10 s (its process died): due then
      // (the store's own expiry of the entry is on the real clock, 10 s away: the lapse counts here).
      await marks.setPresence('p2', ['u'], null, now + 3);
      expect((await marks.claimUsers(now + 3, 50, 100, only)).map((c) => c.uid)).toEqual(['u']);
      expect((await marks.claimUsers(now + 9_999, 50, 100, only)).map((c) => c.uid)).not.toContain('v');
      expect((await marks.claimUsers(now + 10_000, 50, 100, only)).map((c) => c.uid)).toContain('v');
    });

    it('erasing a user (the admin wipe) forgets its last delivered badge and its presence', async () => {
      const { engine, marks } = await open();
      const now = Date.now() + 1;
      await marks.markUsers(['ghost'], now);
      const [claim] = await marks.claimUsers(now, 5_000, 100);
      expect(claim?.uid).toBe('ghost');
      if (!claim) throw new Error('no claim');
      await marks.release(claim, { kind: 'delivered', delivered: { seq: 5, badge: '{"total":3}' }, coolUntil: now });
      await marks.setPresence('p', ['ghost'], now + 10_000, now);
      expect(await (engine as MemoryEngine | RedisEngine).admin().wipeUser('ghost', [])).toBe(true);
      await marks.markUsers(['ghost'], now + 1);
      const [again] = await marks.claimUsers(now + 1, 5_000, 100, { socketlessOnly: true });
      expect(again).toMatchObject({ uid: 'ghost', delivered: null });
    });

    it('with the hook off nothing is marked', async () => {
      const { sync, marks } = await open(false);
      await sync.changeMembers('off', { add: ['p', 'q', 'r', 's'], remove: [] });
      await sync.postMessages([{ conv: 'off', seq: 1, sender: 'p' }]);
      expect(await marks.claimUsers(Date.now() + 1_000, 1_000, 100)).toEqual([]);
      expect(await marks.takeConversations(Date.now() + 1_000, Date.now() + 2_000, 10)).toEqual([]);
    });
  });
}

suite('memory', () => async (badgeMarks) => new MemoryEngine({ ...OPTIONS, badgeMarks }));

let redis: RedisServer | undefined;
let cluster: RedisCluster | undefined;
beforeAll(async () => {
  [redis, cluster] = await Promise.all([startRedisServer(), startRedisCluster()]);
}, 120_000);
afterAll(async () => {
  await Promise.all([redis?.stop(), cluster?.stop()]);
});

suite('Redis', () => async (badgeMarks) => createRedisEngine({ url: (redis as RedisServer).url, prefix: `bm${++prefixes}`, ...OPTIONS, badgeMarks }));
suite(
  'Redis Cluster',
  () => async (badgeMarks) => createRedisEngine({ cluster: (cluster as RedisCluster).addresses, prefix: `bm${++prefixes}`, ...OPTIONS, badgeMarks }),
  1_050,
);
