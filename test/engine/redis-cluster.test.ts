import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { EngineOptions, UserOp } from '../../server/engine/engine.js';
import { UNSEEN_EPOCH } from '../../server/engine/engine.js';
import { keySlot, userKeys } from '../../server/engine/redis/keys.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { runOf } from '../../server/engine/redis/runs.js';
import { buildLibrary } from '../../server/engine/redis/scripts.js';
import { StoreUnavailableError } from '../../server/engine/store-errors.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { freePort } from '../helpers/processes.js';
import { REDIS_CLI_NOT_FOUND, type RedisCluster, startRedisCluster } from '../helpers/redis-cluster.js';
import { findOnPath, REDIS_NOT_FOUND } from '../helpers/redis-server.js';
import { engineConformance } from './conformance.js';
import { join, message, pageStates, rebuild, recordOne, sorted } from './conformance-helpers.js';
import { holdScript, waitReady } from './waits.js';

/**
 * The Redis engine on a real 3-master Redis Cluster: the whole conformance suite, plus what only a
 * cluster has: slots, one run id per master, scripts loaded per master.
 */
const running: () => RedisCluster = fileFixture('Redis Cluster', () => startRedisCluster());
let prefixes = 0;

const clusterEngine = (opts: EngineOptions & { storeTimeoutMs?: number }, prefix = `t${++prefixes}`): Promise<RedisEngine> =>
  createRedisEngine({ cluster: running().addresses, ...opts, prefix });

engineConformance('redis cluster', async (opts) => {
  const engine = await clusterEngine(opts);
  return { engine, cleanup: () => engine.close() };
});

const OPTS: EngineOptions = { snapshotEvery: 3, streamMaxLen: 6 };

/** A plain connection to one master, for looking at what the engine stored there. */
function nodeClient(index: number): Redis {
  const node = running().nodes[index];
  if (!node) throw new Error(`no node ${index}`);
  return new Redis({ host: '127.0.0.1', port: node.port, lazyConnect: true });
}

/** `count` user ids whose keys (under `prefix`) live on master `index`, found by trying names. */
function usersOn(index: number, prefix: string, count: number, tag = 'u'): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) {
    const uid = `${tag}${index}-${i}`;
    if (running().nodeIndexOf(userKeys(prefix, uid).meta) === index) out.push(uid);
  }
  return out;
}

const conversation = (uid: string, conv: string, n: number): UserOp[] => [
  join(uid, conv, 0, 'group'),
  ...Array.from({ length: n }, (_, i) => message(uid, conv, i + 1)),
];

describe('redis cluster engine', () => {
  it('computes slots as Redis does (CLUSTER KEYSLOT), hash tags included', async () => {
    const probe = nodeClient(0);
    try {
      const keys = ['', 'a', '123456789', 'rp:{u:alice}:m', 'rp:bus:{u:alice}', '{c:team}x', 'a{}b', '{}{x}', '{x', 'é{ü}', 'x{y}z{w}'];
      for (const key of keys) expect(keySlot(key), key).toBe(Number(await probe.cluster('KEYSLOT', key)));
      // A user's keys and its bus channel share one slot whatever the prefix.
      const slot = keySlot(userKeys('t9', 'alice').meta);
      for (const key of [...Object.values(userKeys('t9', 'alice')), 'rp:bus:{u:alice}']) expect(keySlot(key), key).toBe(slot);
    } finally {
      probe.disconnect();
    }
  });

  it("stores in each user's meta the run id of the master holding that user's keys", async () => {
    const prefix = 'rid';
    const engine = await clusterEngine(OPTS, prefix);
    const probes = running().nodes.map((_, i) => nodeClient(i));
    try {
      const users = running().nodes.map((_, i) => usersOn(i, prefix, 2));
      await engine.applyUserOps(users.flat().flatMap((uid) => conversation(uid, 'c', 2)));
      for (const [i, uids] of users.entries()) {
        const probe = probes[i]!;
        const runId = runOf(`${await probe.info('server')}\n${await probe.info('replication')}`);
        expect(runId).toMatch(/^[0-9a-f]{40}$/);
        for (const uid of uids) expect(await probe.hget(userKeys(prefix, uid).meta, 'r'), uid).toBe(runId);
      }
      // Three masters, three different runs.
      expect(new Set(await Promise.all(probes.map(async (p) => /run_id:(\w+)/.exec(await p.info('server'))?.[1]))).size).toBe(3);
    } finally {
      for (const p of probes) p.disconnect();
      await engine.close();
    }
  });

  it('runs its functions after FUNCTION FLUSH on every master (a missing function reloads the library), and ready() reloads them', async () => {
    const engine = await clusterEngine(OPTS, 'flush');
    const probes = running().nodes.map((_, i) => nodeClient(i));
    const { name } = buildLibrary();
    const loaded = async (p: Redis): Promise<boolean> => ((await p.call('FUNCTION', 'LIST', 'LIBRARYNAME', name)) as unknown[]).length === 1;
    try {
      const uids = running().nodes.map((_, i) => usersOn(i, 'flush', 1)[0]!);
      await engine.applyUserOps(uids.flatMap((uid) => conversation(uid, 'c', 1)));
      await Promise.all(probes.map((p) => p.call('FUNCTION', 'FLUSH')));
      const results = await engine.applyUserOps(uids.map((uid) => message(uid, 'c', 2)));
      expect(results.map((r) => r.state?.lastSeq)).toEqual(uids.map(() => 2));
      await engine.changeMembers('flushed', { add: ['x'], remove: [], threshold: 10 });
      await recordOne(engine, 'flushed', 1, []);
      await Promise.all(probes.map((p) => p.call('FUNCTION', 'FLUSH')));
      for (const p of probes) expect(await loaded(p)).toBe(false);
      // ready() loads the library on every master again.
      expect(await engine.ready()).toBe(true);
      for (const p of probes) expect(await loaded(p)).toBe(true);
    } finally {
      for (const p of probes) p.disconnect();
      await engine.close();
    }
  });

  it('refuses to start when no seed node answers', async () => {
    const port = await freePort();
    // This error, not any: an unrelated throw (a typo, a bad option) must not pass for it.
    const err = await createRedisEngine({ cluster: [{ host: '127.0.0.1', port }], ...OPTS }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect(err).toMatchObject({ kind: 'not_ready', message: expect.stringMatching(/^cannot connect to Redis/) });
  });

  it("a script moved (MOVED) to another master while in flight is not trusted; the user's next script starts a new epoch", async () => {
    const c = running();
    const prefix = 'moved';
    const engine = await clusterEngine(OPTS, prefix);
    const probes = c.nodes.map((_, i) => nodeClient(i));
    const [p0, p1, p2] = probes as [Redis, Redis, Redis];
    const [uid] = usersOn(0, prefix, 1, 'm');
    if (!uid) throw new Error('no user');
    const k = userKeys(prefix, uid);
    const slot = keySlot(k.meta);
    const [id0, id1, _id2] = (await Promise.all(probes.map((p) => p.cluster('MYID')))) as [string, string, string];
    const [run0, run1] = await Promise.all([p0, p1].map(async (p) => runOf(`${await p.info('server')}\n${await p.info('replication')}`)));
    /** Hands the (empty) slot to `to`: the new owner first, then the others. */
    const moveSlot = async (to: string, order: Redis[]): Promise<void> => {
      for (const p of order) await p.cluster('SETSLOT', slot, 'NODE', to);
    };
    try {
      // Hold the user's first script on master 0 (sent, not yet run), then give the slot to
      // master 1: master 0 answers MOVED and ioredis resends the script there, with master 0's
      // run id in its ARGV.
      const { inFlight } = await holdScript(p0, () => engine.applyUserOps([join(uid, 'c', 0, 'group')]));
      await moveSlot(id1, [p1, p0, p2]);
      await p0.call('CLIENT', 'UNPAUSE');
      await expect(inFlight).rejects.toThrow(/in flight/);
      // It did run, on master 1, under master 0's run id.
      expect(await p1.hget(k.meta, 'r')).toBe(run0);
      const epochThen = await p1.hget(k.meta, 'e');
      expect(epochThen).toBeTruthy();
      const now = await engine.position(uid);
      expect(now.epoch).not.toBe(epochThen);
      expect(now.version).toBe(1);
      expect(await p1.hget(k.meta, 'r')).toBe(run1);
    } finally {
      await p0.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      await engine.close();
      await p1.del(...Object.values(k));
      await moveSlot(id0, [p0, p1, p2]);
      // Every node takes SETSLOT at once, but gossip carrying the older assignment can still
      // reach one and flip it back until the new owner's epoch wins: wait for agreement.
      const owner = async (p: Redis): Promise<number | undefined> => {
        const ranges = await p.cluster('SLOTS');
        return ranges.find(([from, to]) => from <= slot && slot <= to)?.[2]?.[1];
      };
      const deadline = Date.now() + 10_000;
      for (const p of probes) {
        while ((await owner(p)) !== c.nodes[0]?.port && Date.now() < deadline) {
          await p.cluster('SETSLOT', slot, 'NODE', id0);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
      for (const p of probes) {
        expect(await owner(p)).toBe(c.nodes[0]?.port);
        p.disconnect();
      }
    }
  });

  it('one call carries the users of one master; a user whose slot moved after grouping is left out of it, not half applied', async () => {
    const c = running();
    const prefix = 'grouped';
    const engine = await clusterEngine(OPTS, prefix);
    const probes = c.nodes.map((_, i) => nodeClient(i));
    const [p0, p1, p2] = probes as [Redis, Redis, Redis];
    const [a, b] = usersOn(0, prefix, 2, 'g');
    if (!a || !b) throw new Error('no users');
    const slotB = keySlot(userKeys(prefix, b).meta);
    const [id0, id1] = (await Promise.all([p0, p1].map((p) => p.cluster('MYID')))) as [string, string];
    const moveSlot = async (to: string, order: Redis[]): Promise<void> => {
      for (const p of order) await p.cluster('SETSLOT', slotB, 'NODE', to);
    };
    try {
      // Both users on master 0 go in one call, and are applied together.
      const both = await engine.applyUserOps([join(a, 'c'), join(b, 'c')]);
      expect(both.map((r) => r.version)).toEqual([1, 1]);
      // b's (so far empty) slot moves to master 1 behind the client's back: the grouped call
      // reaches master 0, which applies a and stops before b.
      await p0.del(...Object.values(userKeys(prefix, b)));
      await moveSlot(id1, [p1, p0, p2]);
      const outcome = await engine.applyUserOps([message(a, 'c', 1), message(b, 'c', 1)]).then(
        (r) => ({ ok: r }),
        (err: unknown) => ({ err }),
      );
      // a went through on master 0 in the grouped call; b then went on its own and met the
      // redirect (its outcome unknown, as for any script moved in flight), or found master 1.
      expect((await engine.userState(a)).states[0]?.lastSeq).toBe(1);
      // Both branches assert: b's outcome unknown, or b applied (as a pending record) on master 1.
      if ('err' in outcome) expect(String(outcome.err)).toMatch(/in flight|outcome unknown/);
      else expect([outcome.ok[0]?.version, outcome.ok[1]?.member]).toEqual([2, false]);
      console.log(`[cluster moved] b's grouped call: ${'err' in outcome ? 'outcome unknown' : 'applied on master 1'}`);
      // Nothing of b is half written anywhere: master 0 has none of b's keys.
      expect(await p0.call('CLUSTER', 'COUNTKEYSINSLOT', slotB)).toBe(0);
      const [again] = await engine.applyUserOps([message(b, 'c', 2)]);
      expect(again?.member).toBe(false); // b's records were deleted before the move: a pending record now
    } finally {
      await engine.close();
      for (const key of Object.values(userKeys(prefix, b))) await p1.del(key).catch(() => undefined);
      await moveSlot(id0, [p0, p1, p2]);
      for (const p of probes) p.disconnect();
    }
  });

  // It restarts a master, which loses that master's data (no persistence) for every prefix: the
  // other tests keep nothing there between tests (each writes under a prefix of its own, within
  // itself), and this one hands the cluster back whole (cluster_state:ok), so it may run in any place.
  it("a master's restart rotates the epochs of the users it holds, and only theirs", async () => {
    const prefix = 'restart';
    // Commands sent during the restart wait for it: give them more than the default store timeout.
    const engine = await clusterEngine({ ...OPTS, storeTimeoutMs: 15_000 }, prefix);
    try {
      const onRestarted = usersOn(0, prefix, 10);
      const [lost] = onRestarted;
      const [kept] = usersOn(1, prefix, 1);
      if (!lost || !kept) throw new Error('no users');
      await engine.applyUserOps([...conversation(lost, 'c', 5), ...conversation(kept, 'c', 5)]);
      const lostBefore = await engine.position(lost);
      const keptBefore = await engine.position(kept);
      const keptState = await engine.userState(kept);

      // Not waiting for the cluster to take master 0 back: for about 2 s it answers CLUSTERDOWN,
      // and scripts sent meanwhile must still go through (a new connection, its run id, its
      // scripts loaded, CLUSTERDOWN retried).
      await running().restartNode(0, { crash: true, untilOk: false });
      const [p, ...others] = await Promise.all([
        engine.pull(lost, lostBefore, 100),
        ...onRestarted.slice(1).map((uid) => engine.applyUserOps(conversation(uid, 'd', 1))),
      ]);
      expect(others.flat().map((r) => r.version)).toEqual(onRestarted.slice(1).flatMap(() => [1, 2]));
      await waitReady(engine);

      // Master 0 lost everything: the user is unseen again, and the old cursor gets a snapshot (empty here).
      expect(p).toMatchObject({ epoch: UNSEEN_EPOCH, snapshot: { v: 0, convs: [] }, entries: [], version: 0, more: false });
      // Even once the new history passes the old cursor's version, that cursor never gets a delta.
      await engine.applyUserOps(conversation(lost, 'c', 7));
      const later = await engine.pull(lost, lostBefore, 100);
      expect([lostBefore.epoch, UNSEEN_EPOCH]).not.toContain(later.epoch);
      expect(later.version).toBe(8);
      expect(later.more).toBe(false);
      expect(pageStates(later)).toEqual((await engine.userState(lost)).states);

      // Master 1 was not restarted: same epoch, and a cursor continues with deltas.
      expect(await engine.position(kept)).toEqual(keptBefore);
      const [next] = await engine.applyUserOps([message(kept, 'c', 6)]);
      expect(next).toMatchObject({ epoch: keptBefore.epoch, version: keptBefore.version + 1 });
      const delta = await engine.pull(kept, keptBefore, 100);
      expect(delta.snapshot).toBeUndefined();
      expect(delta.entries.map((e) => e.v)).toEqual([keptBefore.version + 1]);
      const rebuilt = await rebuild(engine, kept, keptBefore, new Map(keptState.states.map((s) => [s.conv, s])), 3);
      expect(sorted([...rebuilt.values()], (s) => s.conv)).toEqual((await engine.userState(kept)).states);
    } finally {
      await engine.close();
      await running().waitOk();
    }
  });
});

describe('redis cluster fixture', () => {
  it('fails with a clear error when redis-server or redis-cli is not on the PATH', async () => {
    const path = process.env.PATH;
    const server = findOnPath('redis-server');
    const onlyServer = await mkdtemp(joinPath(tmpdir(), 'redpoint-path-'));
    try {
      process.env.PATH = '/nonexistent';
      await expect(startRedisCluster()).rejects.toThrow(REDIS_NOT_FOUND);
      if (!server) throw new Error(REDIS_NOT_FOUND);
      await symlink(server, joinPath(onlyServer, 'redis-server'));
      process.env.PATH = onlyServer;
      await expect(startRedisCluster()).rejects.toThrow(REDIS_CLI_NOT_FOUND);
    } finally {
      process.env.PATH = path;
      await rm(onlyServer, { recursive: true, force: true });
    }
  });
});
