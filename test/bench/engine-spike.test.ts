import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SpikeStore } from '../../bench/spike/store.js';
import type { MessageEvent } from '../../protocol/types.js';
import { summarize } from '../../protocol/view.js';
import type { RecordedMessage } from '../../server/engine/engine.js';
import { mergeOps } from '../../server/engine/merge-ops.js';
import type { UserOp } from '../../server/engine/ops.js';
import { applyRule, type StoredConv, toConvState } from '../../server/engine/rules.js';
import { mulberry32 } from '../helpers/prng.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';

/**
 * The spike of issue 42 (bench/spike/) against rules.ts: random messages (with mentions, gaps in
 * seq), duplicates, reads and mutes are applied to rules.ts's records in the order they are made,
 * and delivered to the spike's write path shuffled and with duplicates; what the spike's fold
 * shows (`GET /unread` from the registers and from compaction's snapshot, a pull from the start)
 * must equal what rules.ts's records show, and a duplicate delivered again must append nothing to
 * any stream. Compactions run while the deliveries land.
 */
const CONVS: Record<string, { members: string[]; category: string }> = {
  d0: { members: ['u0', 'u1'], category: 'private' },
  g0: { members: ['u0', 'u1', 'u2', 'u3'], category: 'group' },
  constructor: { members: ['u1', 'u2', 'u3'], category: 'group' },
};
const USERS = ['u0', 'u1', 'u2', 'u3'];

type Delivery =
  | { t: 'message'; m: MessageEvent }
  | { t: 'read'; uid: string; conv: string; seq: number }
  | { t: 'mute'; uid: string; conv: string; muted: boolean; clock: number };

let redis: RedisServer;
let client: Redis;

beforeAll(async () => {
  redis = await startRedisServer();
  client = new Redis(redis.url);
});

afterAll(async () => {
  client.disconnect();
  await redis.stop();
});

describe('engine spike (issue 42): native registers + a fold with rules.ts', () => {
  for (const seed of [1, 2, 3]) {
    it(`folds to rules.ts's records under duplicates and reordering (seed ${seed})`, async () => {
      await client.flushall();
      const store = new SpikeStore(client);
      await store.load();
      const rand = mulberry32(seed);
      const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T;
      const records = new Map<string, StoredConv | undefined>();
      const apply = (op: UserOp): void => {
        const key = `${op.uid}\u0000${op.conv}`;
        records.set(key, applyRule(records.get(key), op));
      };
      for (const [conv, { members, category }] of Object.entries(CONVS)) {
        for (const uid of members) {
          const join = { gen: 1, joinGen: 1, joinHead: 0, head: 0, large: false, category };
          apply({ type: 'membership', uid, conv, member: true, ...join });
          await store.join(uid, conv, join);
        }
      }
      const heads = new Map<string, number>();
      const sent: Delivery[] = [];
      let clock = 1;
      let pending: Delivery[] = [];
      for (let step = 0; step < 400; step++) {
        const conv = pick(Object.keys(CONVS));
        const { members, category } = CONVS[conv] as { members: string[]; category: string };
        const r = rand();
        let d: Delivery;
        if (r < 0.45) {
          const seq = (heads.get(conv) ?? 0) + 1 + (rand() < 0.1 ? 2 : 0);
          heads.set(conv, seq);
          const mentions = members.filter(() => rand() < 0.3);
          d = { t: 'message', m: { conv, seq, sender: pick(members), ...(mentions.length > 0 ? { mentions } : {}) } };
          const recorded: RecordedMessage = { info: { conv, maxSeq: seq, large: false, category, memberCount: members.length, gen: 1 }, members };
          for (const op of mergeOps([d.m], new Map([[conv, recorded]]))) apply(op);
        } else if (r < 0.75) {
          d = { t: 'read', uid: pick(members), conv, seq: Math.floor(rand() * ((heads.get(conv) ?? 0) + 2)) };
          apply({ type: 'read', uid: d.uid, conv, seq: d.seq });
        } else if (r < 0.85) {
          d = { t: 'mute', uid: pick(members), conv, muted: rand() < 0.5, clock: clock++ };
          apply({ type: 'settings', uid: d.uid, conv, muted: d.muted });
        } else if (sent.length > 0) {
          d = pick(sent);
        } else continue;
        sent.push(d);
        pending.push(d);
        if (rand() < 0.9 && step < 399) continue;
        // Delivered in a random order, some twice.
        const batch = [...pending, ...pending.filter(() => rand() < 0.2)];
        for (let i = batch.length - 1; i > 0; i--) {
          const j = Math.floor(rand() * (i + 1));
          [batch[i], batch[j]] = [batch[j] as Delivery, batch[i] as Delivery];
        }
        // Compaction racing the writers: a write between its fold and its conditional write is never lost.
        const compacting = Promise.all(USERS.filter(() => rand() < 0.5).map((uid) => store.compact(uid)));
        for (const b of batch) await deliver(store, b);
        await compacting;
        pending = [];
        await expectSame(store, records);
        // Everything again: no register moves, so no stream grows.
        const versions = await Promise.all(USERS.map(async (uid) => (await store.unread(uid)).version));
        for (const b of batch) await deliver(store, b);
        expect(await Promise.all(USERS.map(async (uid) => (await store.unread(uid)).version))).toEqual(versions);
      }
    });
  }
});

async function deliver(store: SpikeStore, d: Delivery): Promise<void> {
  if (d.t === 'message') await store.message(d.m, (CONVS[d.m.conv] as { members: string[] }).members);
  else if (d.t === 'read') await store.read(d.uid, d.conv, d.seq);
  else await store.mute(d.uid, d.conv, d.muted, d.clock);
}

async function expectSame(store: SpikeStore, records: ReadonlyMap<string, StoredConv | undefined>): Promise<void> {
  for (const uid of USERS) {
    const states = [...records.entries()]
      .filter(([key, rec]) => key.startsWith(`${uid}\u0000`) && rec?.member)
      .map(([, rec]) => toConvState(rec as StoredConv));
    const got = await store.unread(uid);
    expect({ ...got, version: 0 }).toEqual(summarize(uid, 'spike', 0, states, {}));
    expect(await store.unreadFromSnapshot(uid)).toEqual(got);
    const pulled = await store.pull(uid, 0, 10_000);
    expect(pulled.next).toBe(got.version);
    expect(pulled.states.sort((a, b) => (a.conv < b.conv ? -1 : 1))).toEqual(states.sort((a, b) => (a.conv < b.conv ? -1 : 1)));
  }
}
