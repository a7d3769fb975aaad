import { readdir, readFile, stat, truncate } from 'node:fs/promises';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { join as joinPath } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { ConvState, Cursor, MessageEvent } from '../../protocol/types.js';
import type { Engine, EngineOptions, RecordedMessage, UserOp } from '../../server/engine/engine.js';
import { UNSEEN_EPOCH } from '../../server/engine/engine.js';
import { mergeOps } from '../../server/engine/merge-ops.js';
import { userKeys } from '../../server/engine/redis/keys.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { buildLibrary, LIBRARY_PRELUDE, SCRIPTS, type ScriptName } from '../../server/engine/redis/scripts.js';
import { USER_META_COUNTERS, USER_META_PACKED } from '../../server/engine/redis/user-meta.js';
import { appendUserOps, opArgs } from '../../server/engine/redis/user-ops.js';
import { contribution, trimmedBase } from '../../server/engine/rules.js';
import { decodeRecord } from '../../server/engine/state-text.js';
import { expectWithin } from '../helpers/bound.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { REDIS_NOT_FOUND, type RedisServer, type RedisServerOptions, startRedisServer } from '../helpers/redis-server.js';
import { categoryTotals, readCounter, readCounters, unpackToLegacy } from '../helpers/user-meta.js';
import { engineConformance } from './conformance.js';
import { join, message, mulberry32, pageStates, read, rebuild, recordOne, sorted } from './conformance-helpers.js';
import { randomizedOps } from './conformance-random.js';
import { aofWritten, holdScript, waitReady } from './waits.js';

const server = fileFixture('redis-server', () => startRedisServer());
let prefixes = 0;

// One server for the file; a distinct key prefix per engine keeps the tests apart.
engineConformance('redis', async (opts) => {
  const engine = await createRedisEngine({ url: server().url, ...opts, prefix: `t${++prefixes}` });
  return { engine, cleanup: () => engine.close() };
});

const OPTS: EngineOptions = { snapshotEvery: 3, streamMaxLen: 6 };

const ops = (n: number): UserOp[] => [join('u', 'c'), ...Array.from({ length: n }, (_, i): UserOp => message('u', 'c', i + 1))];

/**
 * A private redis-server (with this AOF setting) and an engine on it, both stopped after `body`.
 * Its calls may wait out a whole Redis restart (more than the default store timeout).
 */
async function withOwnRedis(aof: RedisServerOptions['aof'], body: (own: RedisServer, engine: RedisEngine) => Promise<void>): Promise<void> {
  const own = await startRedisServer({ aof });
  try {
    const engine = await createRedisEngine({ url: own.url, ...OPTS, storeTimeoutMs: 15_000 });
    try {
      await body(own, engine);
    } finally {
      await engine.close();
    }
  } finally {
    await own.stop();
  }
}

/**
 * A TCP proxy to Redis. `cut()` drops its connections; once `armed`, a new connection forwards
 * replies until the client asks INFO server (the engine learning the run id), then none at all:
 * a Redis stuck at that moment, as seen from the engine.
 */
async function runIdMutingProxy(target: number): Promise<{ port: number; armed: boolean; muted: Promise<void>; cut(): void; close(): void }> {
  const sockets = new Set<Socket>();
  let mutedNow = (): void => undefined;
  const muted = new Promise<void>((resolve) => (mutedNow = resolve));
  const state = {
    port: 0,
    armed: false,
    muted,
    cut: () => {
      for (const s of sockets) s.destroy();
    },
    close: () => {
      server.close();
      state.cut();
    },
  };
  const server = createServer((client) => {
    const upstream = connect(target, '127.0.0.1');
    const muting = state.armed;
    let muted = false;
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
      s.on('error', () => undefined);
    }
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      if (muting && chunk.toString('latin1').toLowerCase().includes('$4\r\ninfo\r\n$6\r\nserver')) {
        muted = true;
        mutedNow();
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!muted) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as AddressInfo).port;
  return state;
}

/** An engine under `prefix` on the file's redis-server, and a plain connection to look at its keys. */
async function withInspector(prefix: string, opts: EngineOptions, body: (engine: RedisEngine, inspect: Redis) => Promise<void>): Promise<void> {
  const engine = await createRedisEngine({ url: server().url, ...opts, prefix });
  const inspect = new Redis(server().url);
  try {
    await body(engine, inspect);
  } finally {
    inspect.disconnect();
    await engine.close();
  }
}

/** Where Redis appends: the newest incremental file of a multi-part AOF (7+), else the single file. */
async function aofFile(dir: string): Promise<string> {
  const multi = joinPath(dir, 'appendonlydir');
  const incr = (await readdir(multi).catch(() => []))
    .map((name) => ({ name, n: Number(/\.(\d+)\.incr\.aof$/.exec(name)?.[1] ?? NaN) }))
    .filter((f) => Number.isFinite(f.n))
    .sort((a, b) => a.n - b.n)
    .at(-1);
  return incr ? joinPath(multi, incr.name) : joinPath(dir, 'appendonly.aof');
}

/** Everything the client ends up holding after pulling from `cursor` until `more` is false. */
async function catchUp(engine: Engine, uid: string, cursor: Cursor | null, held: ReadonlyMap<string, ConvState>) {
  const first = await engine.pull(uid, cursor, 100);
  const state = await rebuild(engine, uid, cursor, held, 3);
  return { first, states: sorted([...state.values()], (s) => s.conv) };
}

describe('redis engine across restarts', () => {
  // A restart of Redis rotates every user's epoch, whether or not it lost writes: the engine
  // cannot tell a restart that lost the last second (AOF everysec) from one that lost nothing
  // (AOF always, a clean shutdown). That is the price: one snapshot per client per Redis restart.
  it.each([
    ['everysec', 'kill'],
    ['always', 'restart'],
    ['always', 'kill'],
  ] as const)('with AOF %s the data survives a %s under a new epoch; an old cursor gets a snapshot', async (aof, how) => {
    await withOwnRedis(aof, async (own, engine) => {
      await engine.changeMembers('c', { add: ['u'], remove: [], category: 'group', threshold: 500 });
      await recordOne(engine, 'c', 10, []);
      await engine.applyUserOps([...ops(10), join('w', 'c')]);
      const before = await engine.userState('u');
      const other = await engine.position('w');
      // A client that caught up, and one that is a few entries behind.
      const caughtUp = await catchUp(engine, 'u', null, new Map());
      expect(caughtUp.states).toEqual(before.states);
      const behind = { epoch: before.epoch, version: before.version - 3 };

      if (how === 'kill') {
        // The test's claim is that what Redis wrote survives a kill: wait until it has written it.
        if (aof === 'everysec') await aofWritten(own.url);
        await own.kill();
      }
      await own.restart();
      await waitReady(engine);

      const after = await engine.userState('u');
      expect(after.epoch).not.toBe(before.epoch);
      expect((await engine.position('w')).epoch).not.toBe(other.epoch);
      // Nothing was lost here (a killed process leaves its appends in the page cache); the
      // version continues from what Redis kept.
      expect({ ...after, epoch: before.epoch }).toEqual(before);
      for (const cursor of [{ epoch: before.epoch, version: before.version }, behind]) {
        const { first, states } = await catchUp(engine, 'u', cursor, new Map(caughtUp.states.map((s) => [s.conv, s])));
        expect(first.epoch).toBe(after.epoch);
        expect(first.snapshot).toBeDefined();
        expect(states).toEqual(after.states);
      }
      expect(await engine.getConversation('c')).toMatchObject({ conv: 'c', maxSeq: 10, large: false, category: 'group', memberCount: 1 });
      // The new epoch is stable for the rest of this run, and versions go on from where they were.
      const [next] = await engine.applyUserOps([{ type: 'read', uid: 'u', conv: 'c', seq: 10 }]);
      expect(next).toMatchObject({ changed: true, epoch: after.epoch, version: after.version + 1 });
      const delta = await engine.pull('u', { epoch: after.epoch, version: after.version }, 100);
      expect(delta.snapshot).toBeUndefined();
      expect(delta.entries.map((x) => x.v)).toEqual([after.version + 1]);
    });
  });

  it('with AOF everysec, a crash that loses the last writes never gives a client a wrong delta', async () => {
    await withOwnRedis('everysec', async (own, engine) => {
      await engine.applyUserOps(ops(5)); // versions 1..6
      const kept = await engine.userState('u');
      const file = await aofFile(own.dir);
      // Everything Redis appended is in the file (waits.ts: a settled size is not enough under load).
      await aofWritten(own.url);
      const { size } = await stat(file);
      // Versions 7..11: a client pulls them, then the crash loses them (the OS dropped the
      // unsynced tail of the AOF, simulated by cutting the file back).
      await engine.applyUserOps(
        [6, 7, 8, 9, 10].map((seq): UserOp => ({ type: 'message', uid: 'u', conv: 'c', lastSeq: seq, readSeq: 0, mentionSeqs: [seq] })),
      );
      const client = await catchUp(engine, 'u', null, new Map());
      const cursor = await engine.position('u');
      expect(cursor).toEqual({ epoch: kept.epoch, version: 11 });
      await own.kill();
      await truncate(file, size);
      await own.restart();
      await waitReady(engine);

      const restarted = await engine.userState('u');
      expect({ ...restarted, epoch: kept.epoch }).toEqual(kept); // the version went back to 6
      expect(restarted.epoch).not.toBe(kept.epoch);
      // New, different writes bring the user back to version 11, the version the client holds.
      await engine.applyUserOps([read('u', 'c', 4), message('u', 'c', 30), read('u', 'c', 20), message('u', 'c', 31), read('u', 'c', 25)]);
      const now = await engine.userState('u');
      expect(now.version).toBe(cursor.version);
      expect(now.states).not.toEqual(client.states);
      const { first, states } = await catchUp(engine, 'u', cursor, new Map(client.states.map((s) => [s.conv, s])));
      expect(first.epoch).toBe(now.epoch);
      expect(first.snapshot).toBeDefined();
      expect(states).toEqual(now.states);
    });
  });

  it('calls made while Redis is down wait for its run id and run under the new run', async () => {
    await withOwnRedis('always', async (own, engine) => {
      await engine.applyUserOps(ops(4));
      const old = await engine.position('u');
      await own.kill();
      await waitReady(engine, false);
      const applied = engine.applyUserOps([read('u', 'c', 2)]);
      const pulled = engine.pull('u', old, 100);
      const position = engine.position('u');
      // Redis stays down a while with the calls waiting: none of them settles meanwhile (neither
      // fails nor answers from anything but the restarted Redis).
      let settled = 0;
      for (const call of [applied, pulled, position])
        call.then(
          () => settled++,
          () => settled++,
        );
      await delay(500);
      expect(settled, 'calls settled while Redis was down').toBe(0);
      await own.restart();
      const [r] = await applied;
      const p = await pulled;
      const pos = await position;
      expect(r).toMatchObject({ changed: true, version: old.version + 1 });
      expect(r?.epoch).not.toBe(old.epoch);
      expect(p.epoch).toBe(r?.epoch);
      expect(pos).toEqual({ epoch: r?.epoch, version: old.version + 1 });
      // The snapshot (with what follows it) holds the user as it is now, the read included.
      expect({ version: p.version, more: p.more }).toEqual({ version: old.version + 1, more: false });
      expect(pageStates(p)).toEqual((await engine.userState('u')).states);
    });
  });

  it('a script resent over a new connection to a restarted Redis is not trusted', async () => {
    await withOwnRedis('always', async (own, engine) => {
      const admin = new Redis(own.url, { lazyConnect: true, retryStrategy: () => null });
      try {
        await engine.applyUserOps(ops(4));
        const old = await engine.position('u');
        // Hold the engine's next script in flight (sent, not yet run), then crash Redis: ioredis
        // resends it over the next connection, where it carries the old run id.
        await admin.connect();
        const { inFlight } = await holdScript(admin, () => engine.applyUserOps([read('u', 'c', 3)]));
        admin.disconnect();
        await own.kill();
        await own.restart();
        await expect(inFlight).rejects.toThrow(/reconnected while a user script was in flight/);
        const after = await engine.pull('u', old, 100);
        expect(after.epoch).not.toBe(old.epoch);
        expect(after.version).toBe(old.version + 1); // the resent script did run
        expect(after.more).toBe(false);
        expect(pageStates(after)).toEqual((await engine.userState('u')).states);
      } finally {
        admin.disconnect();
      }
    });
  });

  it('a reconnect to the same Redis run keeps the epoch, and a script resent over it is trusted', async () => {
    await withOwnRedis(false, async (own, engine) => {
      const admin = new Redis(own.url, { lazyConnect: true });
      try {
        await engine.applyUserOps(ops(4));
        const old = await engine.position('u');
        await admin.connect();
        // Scripts wait while writes are paused; CLIENT KILL still runs and drops the engine's
        // connection with the script in flight, so ioredis resends it over the next one.
        const { inFlight } = await holdScript(admin, () => engine.applyUserOps([read('u', 'c', 3)]));
        expect(Number(await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes'))).toBeGreaterThan(0);
        await admin.call('CLIENT', 'UNPAUSE');
        const [r] = await inFlight;
        expect(r).toMatchObject({ changed: true, epoch: old.epoch, version: old.version + 1 });
        const p = await engine.pull('u', old, 100);
        expect(p.snapshot).toBeUndefined();
        expect(p.entries.map((x) => x.v)).toEqual([old.version + 1]);
      } finally {
        admin.disconnect();
      }
    });
  });

  it('a Redis that stops answering while the run id of a new connection is asked fails the call within the store timeout', async () => {
    const own = await startRedisServer({ aof: false });
    const proxy = await runIdMutingProxy(own.port);
    const engine = await createRedisEngine({ url: `redis://127.0.0.1:${proxy.port}`, ...OPTS, storeTimeoutMs: 500 });
    try {
      await engine.applyUserOps(ops(2));
      // The next connection gets replies up to its INFO server (the run id), and none after.
      proxy.armed = true;
      proxy.cut();
      await proxy.muted;
      const started = Date.now();
      const outcome = await engine.userState('u').then(
        () => 'answered',
        (err: Error) => err.name,
      );
      expect(outcome).toBe('StoreUnavailableError');
      expectWithin('a call on a Redis that stopped answering mid-handshake failed', Date.now() - started, 500);
    } finally {
      proxy.close();
      await engine.close();
      await own.stop();
    }
  });

  it('without persistence a lost user is unseen again, and an old cursor gets a snapshot', async () => {
    await withOwnRedis(false, async (own, engine) => {
      await engine.applyUserOps(ops(4));
      const old = await engine.position('u');
      expect(old.version).toBe(5);
      await own.kill();
      await waitReady(engine, false);
      await own.restart();
      await waitReady(engine);
      expect(await engine.getConversation('c')).toBeNull();
      const lost = await engine.pull('u', old, 100);
      expect(lost).toMatchObject({ epoch: UNSEEN_EPOCH, snapshot: { v: 0, convs: [] }, entries: [], version: 0, more: false });
      // Even once the new stream is past the old cursor's version, the old cursor never gets a delta.
      await engine.applyUserOps(ops(9));
      const later = await engine.pull('u', old, 100);
      expect([old.epoch, UNSEEN_EPOCH]).not.toContain(later.epoch);
      expect(later.version).toBe(10);
      expect(later.more).toBe(false);
      expect(pageStates(later)).toEqual((await engine.userState('u')).states);
    });
  });
});

describe('redis engine storage', () => {
  it('a user last used under another Redis run (or before run ids) gets a new epoch once; versions and stream stay', async () => {
    await withInspector('rid', OPTS, async (engine, inspect) => {
      const k = userKeys('rid', 'u');
      await engine.applyUserOps(ops(7));
      const client = await catchUp(engine, 'u', null, new Map());
      const first = await engine.position('u');
      const runId = await inspect.hget(k.meta, 'r');
      expect(runId).toMatch(/^[0-9a-f]{40}$/);
      expect((await engine.position('u')).epoch).toBe(first.epoch);
      for (const stale of ['another-run', null]) {
        const before = await engine.position('u');
        const stream = await inspect.lrange(k.stream, 0, -1);
        if (stale === null) await inspect.hdel(k.meta, 'r');
        else await inspect.hset(k.meta, 'r', stale);
        const { first: p, states } = await catchUp(engine, 'u', before, new Map(client.states.map((s) => [s.conv, s])));
        expect(p.epoch).not.toBe(before.epoch);
        expect(p.snapshot).toBeDefined();
        expect(states).toEqual((await engine.userState('u')).states);
        expect(await engine.position('u')).toEqual({ epoch: p.epoch, version: before.version });
        expect(await inspect.hget(k.meta, 'r')).toBe(runId);
        expect(await inspect.lrange(k.stream, 0, -1)).toEqual(stream);
        const [next] = await engine.applyUserOps([message('u', 'c', 100 + before.version)]);
        expect(next).toMatchObject({ epoch: p.epoch, version: before.version + 1 });
      }
    });
  });

  it('keeps the entries after base and the snapshot at sv exactly as the memory engine does', async () => {
    const opts = { snapshotEvery: 3, streamMaxLen: 7 };
    await withInspector('trim', opts, async (engine, inspect) => {
      const k = userKeys('trim', 'u');
      // rules.ts for one conversation: interval max(3, 1) = 3.
      let sv = 0;
      let base = 0;
      for (let v = 1; v <= 40; v++) {
        await engine.applyUserOps([v === 1 ? join('u', 'c') : message('u', 'c', v)]);
        if (v - sv >= 3) sv = v;
        base = trimmedBase(base, v, sv, 3);
        const meta = await readCounters(inspect, k.meta);
        expect([meta?.version, meta?.base, meta?.snapshotVersion], `meta at v${v}`).toEqual([v, base, sv]);
        expect(await inspect.llen(k.stream), `entries at v${v}`).toBe(v - base);
        expect(await inspect.exists(k.snapshot), `snapshot at v${v}`).toBe(sv > 0 ? 1 : 0);
      }
    });
  });

  it('reads a meta from before the counters were packed and converts it at its next write (randomized, checked against the model)', async () => {
    await withInspector('legacy', { snapshotEvery: 7, streamMaxLen: 10 }, async (engine, inspect) => {
      const coin = mulberry32(31);
      let converted = 0;
      // Between batches, some touched users' metas go back to the text fields of before the
      // packing: every reader and writer must take them as they are.
      await randomizedOps(engine, mulberry32(29), 400, async (uids) => {
        for (const uid of uids) if (coin() < 0.5 && (await unpackToLegacy(inspect, userKeys('legacy', uid).meta))) converted++;
      });
      expect(converted).toBeGreaterThan(20);
      for (const uid of ['u1', 'u2', 'u3']) {
        const k = userKeys('legacy', uid);
        await unpackToLegacy(inspect, k.meta);
        expect(Object.keys(await inspect.hgetall(k.meta)), uid).not.toContain(USER_META_PACKED);
        const before = await readCounters(inspect, k.meta);
        const [result] = await engine.applyUserOps([join(uid, 'fresh')]);
        expect(result?.version, uid).toBe((before?.version ?? 0) + 1);
        const fields = Object.keys(await inspect.hgetall(k.meta));
        expect(fields, uid).toContain(USER_META_PACKED);
        expect(
          fields.filter((f) => USER_META_COUNTERS.some((c) => c.legacy === f)),
          uid,
        ).toEqual([]);
        expect(await readCounter(inspect, k.meta, 'members'), uid).toBe((before?.members ?? 0) + 1);
        // Small enough for Redis's compact hash encoding (hash-max-listpack-value 64).
        expect(await inspect.object('ENCODING', k.meta), uid).toBe('listpack');
      }
    });
  });

  it('keeps the derived fields exact: member count, large hash, no zero category fields (randomized)', async () => {
    // user_apply writes these only when they change (net deltas, flag changes), so check the raw
    // keys against the records after random ops, not just what the Engine API reports.
    await withInspector('derived', { snapshotEvery: 7, streamMaxLen: 10 }, async (engine, inspect) => {
      await randomizedOps(engine, mulberry32(7), 600);
      for (const uid of ['u1', 'u2', 'u3']) {
        const k = userKeys('derived', uid);
        const records = Object.entries(await inspect.hgetall(k.records)).map(([conv, text]) => decodeRecord(conv, text));
        const members = records.filter((r) => r.member);
        expect(await readCounter(inspect, k.meta, 'members'), uid).toBe(members.length);
        const large = members.filter((r) => r.large).map((r) => r.conv);
        expect(sorted(await inspect.hkeys(k.large)), uid).toEqual(sorted(large));
        expect(sorted((await engine.pull(uid, null, 0)).largeConvs), uid).toEqual(sorted(large));
        const cats = await categoryTotals(inspect, k.meta);
        const expected = new Map<string, number>();
        // rules.ts contribution: levels and non-counting seqs (issue 43) included.
        for (const r of members) {
          const { unread, category } = contribution(r);
          if (unread > 0) expected.set(category, (expected.get(category) ?? 0) + unread);
        }
        expect(cats, uid).toEqual(expected);
      }
    });
  });

  it('a flush in one call (recordAndApply) leaves every user as the two steps do: too many ops for one call, one-to-one, read-diffused, mentions, an unknown conversation', async () => {
    const one = await createRedisEngine({ url: server().url, ...OPTS, prefix: `t${++prefixes}` });
    const two = await createRedisEngine({ url: server().url, ...OPTS, prefix: `t${++prefixes}` });
    try {
      // 150 members: more user ops than one ingest_flush call applies (MAX_FLUSH_OPS).
      const crowd = Array.from({ length: 150 }, (_, i) => `m${i}`);
      const rosters: [string, string[], number][] = [
        ['big', crowd, 1_000],
        ['dm', ['a', 'b'], 1_000],
        ['wide', ['a', 'b', 'c', 'd'], 2],
      ];
      const gens = new Map<string, number>();
      for (const e of [one, two]) {
        for (const [conv, uids, threshold] of rosters) {
          const step = await e.changeMembers(conv, { add: uids, remove: [], threshold });
          if (e === one) gens.set(conv, step.info.gen);
          await e.applyUserOps(uids.map((uid) => join(uid, conv, 0, 'group', step.info.large)));
        }
      }
      const messages: MessageEvent[] = [
        { conv: 'big', seq: 1, sender: 'm0', mentions: ['m7', 'm8'] },
        { conv: 'dm', seq: 1, sender: 'a' },
        { conv: 'dm', seq: 2, sender: 'b', mentions: ['a'] },
        { conv: 'wide', seq: 5, sender: 'c', mentions: ['d', 'nobody'] },
        { conv: 'gone', seq: 1, sender: 'a' },
      ];
      const items = ['big', 'dm', 'wide', 'gone'].map((conv) => {
        const own = messages.filter((m) => m.conv === conv);
        return { conv, seq: Math.max(...own.map((m) => m.seq)), candidates: [...new Set(own.flatMap((m) => [m.sender, ...(m.mentions ?? [])]))] };
      });
      const whole = await one.recordAndApply(items, messages, Date.now());
      const recorded = await two.recordMessages(items, Date.now());
      const byConv = new Map(recorded.flatMap((r) => (r ? [[r.info.conv, r] as const] : [])));
      const ops = mergeOps(messages, byConv);
      await two.applyUserOps(ops, { results: false });
      // Generations are stamped by each engine's clock: each its own.
      const info = (r: RecordedMessage | null) => (r ? { ...r.info, gen: 0 } : null);
      expect(whole.recorded.map(info)).toEqual(recorded.map(info));
      expect(whole.recorded.map((r) => r?.info.gen ?? null)).toEqual(items.map((i) => gens.get(i.conv) ?? null));
      expect(whole.userOps).toBe(ops.length);
      for (const uid of [...crowd, 'a', 'b', 'c', 'd']) {
        const [got, want] = await Promise.all([one.userState(uid), two.userState(uid)]);
        expect(
          sorted(got.states, (s) => s.conv),
          uid,
        ).toEqual(sorted(want.states, (s) => s.conv));
        expect(got.totals, uid).toEqual(want.totals);
        expect(got.version, uid).toBe(want.version);
      }
      expect((await one.userState('m7')).totals.mentions).toBe(1);
      expect((await one.userState('a')).totals.total).toBe(1);
    } finally {
      await one.close();
      await two.close();
    }
  });

  it('reads of unknown users and refused ops create no key', async () => {
    await withInspector('unseen', OPTS, async (engine, inspect) => {
      await engine.pull('ghost', null, 10);
      await engine.pull('ghost', { epoch: 'x', version: 3 }, 10);
      await engine.position('ghost');
      await engine.userState('ghost');
      await engine.applyUserOps([read('ghost', 'c', 4), { type: 'settings', uid: 'ghost', conv: 'c', muted: true, deleteAt: 3 }]);
      expect(await inspect.keys('unseen:*')).toEqual([]);
    });
  });

  it('a stream idle past streamIdleSeconds expires; the records stay and history restarts at the current version', async () => {
    await withInspector('idle', { ...OPTS, streamIdleSeconds: 1 }, async (engine, inspect) => {
      const k = userKeys('idle', 'u');
      await engine.applyUserOps(ops(8));
      const at = await engine.position('u');
      const state = await engine.userState('u');
      expect(await inspect.ttl(k.stream)).toBeGreaterThan(0);
      await inspect.pexpire(k.stream, 1);
      await inspect.pexpire(k.snapshot, 1);
      await delay(20);
      expect(await inspect.exists(k.stream, k.snapshot)).toBe(0);
      // A client at the current version just continues; one behind gets the rebuilt snapshot.
      expect(await engine.pull('u', at, 10)).toMatchObject({ epoch: at.epoch, entries: [], version: at.version });
      const behind = await engine.pull('u', { ...at, version: at.version - 2 }, 10);
      expect(behind).toMatchObject({ epoch: at.epoch, snapshot: { v: at.version, convs: state.states }, entries: [], version: at.version });
      expect(await engine.userState('u')).toEqual(state);
      const [next] = await engine.applyUserOps([read('u', 'c', 2)]);
      expect(next).toMatchObject({ changed: true, epoch: at.epoch, version: at.version + 1 });
      expect((await engine.pull('u', at, 10)).entries.map((e) => e.v)).toEqual([at.version + 1]);
    });
  });
});

describe('redis engine scripts', () => {
  it("the user step's op widths (FIELDS, lib/apply.lua) are the ones user-ops.ts writes: no offset of one side can drift from the other", async () => {
    const lua = await readFile(new URL('../../server/engine/redis/lua/lib/apply.lua', import.meta.url), 'utf8');
    const table = /local FIELDS = \{([^}]*)\}/.exec(lua)?.[1] ?? '';
    const fields = new Map([...table.matchAll(/(\w+) = (\d+)/g)].map((m) => [m[1], Number(m[2])]));
    const ops: UserOp[] = [
      message('u', 'c', 1),
      // Issue 43: a message with a time is 'M', one argument more.
      { type: 'message', uid: 'u', conv: 'c', lastSeq: 1, readSeq: 0, mentionSeqs: [], at: 1_760_000_000_000 },
      // Issue 43: with non-counting seqs it is 'n', its `at` may be empty.
      { type: 'message', uid: 'u', conv: 'c', lastSeq: 1, readSeq: 0, mentionSeqs: [], nocountSeqs: [1] },
      read('u', 'c', 1),
      join('u', 'c', 0, 'group'),
      // Issue 43: a rewrite to write diffusion with the conversation's non-counting seqs is 'G'.
      { ...(join('u', 'c', 0, 'group') as Extract<UserOp, { type: 'membership'; member: true }>), nocountSeqs: [2] },
      { type: 'membership', uid: 'u', conv: 'c', gen: 2, member: false },
      { type: 'settings', uid: 'u', conv: 'c', muted: true },
      { type: 'unread-from', uid: 'u', conv: 'c', seq: 1, gen: 1 },
    ];
    const seen = new Set<string>();
    for (const op of ops) {
      const args: (string | number)[] = [];
      appendUserOps(args, [op]);
      const letter = String(args[0]);
      seen.add(letter);
      expect(args.length, op.type).toBe(opArgs(op));
      expect(fields.get(letter), op.type).toBe(opArgs(op) - 2);
    }
    expect([...fields.keys()].sort()).toEqual([...seen].sort());
    // ingest_flush.lua writes message ops for user_apply.lua itself: the same width.
    const flush = await readFile(new URL('../../server/engine/redis/lua/ingest_flush.lua', import.meta.url), 'utf8');
    const slots = /((?:apply\[n \+ \d\], )*apply\[n \+ \d\]) = 'm'/.exec(flush)?.[1]?.split(',').length;
    expect(slots).toBe((fields.get('m') ?? 0) + 2);
    const timed = /((?:apply\[n \+ \d\], )*apply\[n \+ \d\]) = 'M'/.exec(flush)?.[1]?.split(',').length;
    expect(timed).toBe((fields.get('M') ?? 0) + 2);
  });

  it('one library: the shared Lua defined once, each script a function; exactly the functions that read the epoch carry a run id', async () => {
    const dir = new URL('../../server/engine/redis/lua/', import.meta.url);
    const library = buildLibrary();
    for (const file of LIBRARY_PRELUDE) {
      const text = await readFile(new URL(file, dir), 'utf8');
      expect(library.source.split(text).length - 1, file).toBe(1);
    }
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      const spec = SCRIPTS[name] as { file: string; user?: true };
      const body = await readFile(new URL(spec.file, dir), 'utf8');
      // No script body rotates the epoch itself; it asks the shared Lua (currentEpoch, userMeta).
      expect(body, name).not.toMatch(/'e',\s*\w+,\s*'r'/);
      expect(library.source, name).toContain(`function_name='${library.functions[name]}'`);
      expect(library.source, name).toContain(body);
      // A function that reads or starts the epoch needs the run id (runs.ts); the others must not be resent by the run tracker.
      expect(/(userMeta|currentEpoch|rebuildUser|script_userApply|applyUsers)\(/.test(body), name).toBe(spec.user === true);
    }
    const redis = await startRedisServer();
    const probe = new Redis(redis.url);
    try {
      await probe.call('FUNCTION', 'LOAD', library.source);
      const listed = (await probe.call('FUNCTION', 'LIST')) as unknown[][];
      expect(listed.map((l) => l[1])).toEqual([library.name]);
    } finally {
      probe.disconnect();
      await redis.stop();
    }
  });
});

describe('redis-server fixture', () => {
  it('throws a clear error when redis-server is not on the PATH', async () => {
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      await expect(startRedisServer()).rejects.toThrow(REDIS_NOT_FOUND);
    } finally {
      process.env.PATH = path;
    }
  });
});
