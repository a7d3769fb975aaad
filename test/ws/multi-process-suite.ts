import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AckFrame } from '../../protocol/frames.js';
import type { TestServer } from '../helpers/test-server.js';
import { expectMatchesServer, isChange, isHead, waitMatchesServer } from '../helpers/ws-expect.js';

/**
 * The scenarios of two Redpoint processes of one deployment (two `startServer`s, one key prefix)
 * sharing Redis: the Redis engine for state AND the Redis bus for notifications. A change made
 * through either process reaches the devices connected to the other. Run over one redis-server
 * (multi-process.test.ts) and over a Redis Cluster with sharded pub/sub (cluster.test.ts): the
 * same scenarios, each setup with its own fixture and its own way of seeing subscriptions.
 */

/** What the engine's scripts publish on, after the prefix (server/engine/redis/keys.ts). */
export const busPrefix = (keyPrefix: string): string => `${keyPrefix}:bus:`;
const userChannel = (uid: string): string => `{u:${uid}}`;
const convChannel = (conv: string): string => `{c:${conv}}`;

/** What an id names: a user (`u`) or a conversation (`c`). */
export type IdKind = 'u' | 'c';

/**
 * One id a scenario wants: its name, what it is, and the shard (0, 1 or 2) it should live on.
 * Scenarios place ids on different shards so that, on a cluster, they cross masters on purpose;
 * a setup without shards ignores the placement.
 */
export type WantedId = [name: string, kind: IdKind, shard: number];

export interface TwoProcesses {
  a: TestServer;
  b: TestServer;
  /**
   * Resolves once `count` processes subscribed the notification channel `channel` (without busPrefix).
   * The bus subscription of a process goes out asynchronously after a client's hello; a publish
   * by the other process before Redis registered it would be missed (and repaired by a pull, but
   * then the scenario would not be testing the bus). A setup may assert more on the way (where
   * the subscription lives).
   */
  subscribed(channel: string, count: number): Promise<void>;
  /** Fresh ids for one scenario, in the order wanted. Default: `<name>-<n>`, placement ignored. */
  ids?(...wanted: WantedId[]): string[];
}

/** Registers something for the suite's afterAll to undo (last registered, first undone). */
export type Defer = (cleanup: () => unknown) => void;

/**
 * Registers the scenarios under `title`. `setup` runs in beforeAll; it registers with `defer`
 * each thing it starts as soon as it has started it, so that a setup failing halfway still
 * leaves nothing running.
 */
export function twoProcessSuite(title: string, setup: (defer: Defer) => Promise<TwoProcesses>): void {
  describe(title, () => {
    const cleanups: (() => unknown)[] = [];
    let env: TwoProcesses;
    let n = 0;

    beforeAll(async () => {
      env = await setup((cleanup) => cleanups.push(cleanup));
    });

    afterAll(async () => {
      const errors: unknown[] = [];
      for (const cleanup of cleanups.splice(0).reverse()) {
        try {
          await cleanup();
        } catch (err) {
          errors.push(err);
        }
      }
      if (errors.length > 0) throw errors[0];
    });

    const ids = (...wanted: WantedId[]): string[] => {
      if (env.ids) return env.ids(...wanted);
      n++;
      return wanted.map(([name]) => `${name}-${n}`);
    };

    it('a message ingested through A is pushed to a client connected to B', async () => {
      const { a, b, subscribed } = env;
      // The conversation, the recipient and the sender each on a different shard.
      const [dm, alice, bob] = ids(['dm', 'c', 0], ['alice', 'u', 1], ['bob', 'u', 2]) as [string, string, string];
      await a.members(dm, { add: [alice, bob] });
      const onB = await b.client(alice, { binary: true });
      await subscribed(userChannel(alice), 1);

      const m = onB.mark();
      await a.post({ conv: dm, seq: 1, sender: bob, mentions: [alice] });
      const push = await onB.waitFrame(
        isChange(dm, (f) => f.state?.lastSeq === 1),
        { since: m },
      );
      expect(push.v).toBe((await a.position(alice)).version);
      expect(onB.stats.pullsSent).toBe(0);
      expect(onB.summary()).toMatchObject({ total: 1, mentions: 1 });
      await expectMatchesServer(onB, a, 'client on B vs unread on A');
      await expectMatchesServer(onB, b, 'client on B vs unread on B');
    });

    it("a read from B's client reaches the same user's device on A", async () => {
      const { a, b, subscribed } = env;
      const [dm, alice, bob] = ids(['dm', 'c', 2], ['alice', 'u', 0], ['bob', 'u', 1]) as [string, string, string];
      await a.members(dm, { add: [alice, bob] });
      await b.post([
        { conv: dm, seq: 1, sender: bob },
        { conv: dm, seq: 2, sender: bob },
      ]);
      const onA = await a.client(alice);
      const onB = await b.client(alice, { binary: true });
      await subscribed(userChannel(alice), 2);
      expect(onA.summary().total).toBe(2);

      const m = onA.mark();
      const ack = (await onB.read([[dm, 2]])) as AckFrame;
      expect(ack.t).toBe('ack');
      const push = await onA.waitFrame(
        isChange(dm, (f) => f.state?.readSeq === 2),
        { since: m },
      );
      expect(push.v).toBe(ack.version);
      await onA.waitFor(() => onA.cursor?.version === ack.version, 5000, 'A at the ack version');
      expect(onA.summary().total).toBe(0);
      await expectMatchesServer(onA, a, 'device on A');
      await expectMatchesServer(onB, b, 'device on B');
    });

    it("read receipts: a peer's read through A reaches the other member's client on B as a reads push, not a change", async () => {
      const { a, b, subscribed } = env;
      const [dm, alice, bob] = ids(['dm', 'c', 0], ['alice', 'u', 1], ['bob', 'u', 2]) as [string, string, string];
      await a.members(dm, { add: [alice, bob] });
      await a.post([
        { conv: dm, seq: 1, sender: bob },
        { conv: dm, seq: 2, sender: bob },
      ]);
      const bobOnB = await b.client(bob, { binary: true });
      await subscribed(userChannel(bob), 1);
      const cursor = { ...bobOnB.cursor };
      const m = bobOnB.mark();
      await a.ok('POST', `/v1/users/${alice}/read`, { conv: dm, seq: 2 });
      const push = await bobOnB.waitFrame((f) => f.t === 'reads' && f.conv === dm, { since: m, label: 'the reads push' });
      expect(push).toEqual({ t: 'reads', conv: dm, members: 2, reads: { [alice]: 2 } });
      expect(bobOnB.framesSince(m).filter((f) => f.t === 'change')).toEqual([]);
      expect(bobOnB.cursor).toEqual(cursor);
      expect((await b.unread(bob)).conversations.find((c) => c.conv === dm)?.peerReadSeq).toBe(2);
    });

    it("a large group's head and membership changes made through A reach members on B", async () => {
      const { a, b, subscribed } = env;
      const [big, alice, bob, carol, dave, erin] = ids(
        ['big', 'c', 1],
        ['alice', 'u', 0],
        ['bob', 'u', 2],
        ['carol', 'u', 0],
        ['dave', 'u', 1],
        ['erin', 'u', 2],
      ) as [string, string, string, string, string, string];
      await a.members(big, { add: [alice, bob, carol, dave] });
      const carolOnB = await b.client(carol);
      const erinOnB = await b.client(erin, { binary: true });
      // B follows the group because carol is online there (on a cluster, on the group's own shard).
      await subscribed(convChannel(big), 1);
      await subscribed(userChannel(erin), 1);

      let m = carolOnB.mark();
      await a.post({ conv: big, seq: 1, sender: bob });
      await carolOnB.waitFrame(isHead(big, 1), { since: m });
      await expectMatchesServer(carolOnB, a, 'carol');

      // Erin joins through A while connected to B: B hears the join on the bus and follows the group.
      const me = erinOnB.mark();
      await a.members(big, { add: [erin] });
      await erinOnB.waitFrame(
        isChange(big, (f) => f.state?.large === true),
        { since: me },
      );
      m = erinOnB.mark();
      await a.post({ conv: big, seq: 2, sender: bob });
      await erinOnB.waitFrame(isHead(big, 2), { since: m });
      const got = await waitMatchesServer(erinOnB, a);
      expect(got.conversations).toMatchObject([{ conv: big, lastSeq: 2, readSeq: 1, unread: 1 }]);
    });
  });
}
