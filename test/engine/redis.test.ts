import { readdir, readFile, stat, truncate } from 'node:fs/promises';
import { join as joinPath } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { ConvState, Cursor } from '../../protocol/types.js';
import type { Engine, EngineOptions, UserOp } from '../../server/engine/engine.js';
import { Redis } from 'ioredis';
import { userKeys } from '../../server/engine/redis/keys.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { REDIS_NOT_FOUND, startRedisServer, type RedisServer, type RedisServerOptions } from '../helpers/redis-server.js';
import { join, message, mulberry32, read, rebuild, sorted } from './conformance-helpers.js';
import { randomizedOps } from './conformance-random.js';
import { decodeRecord } from '../../server/engine/redis/codec.js';
import { loadScriptSources, SCRIPTS, type ScriptName } from '../../server/engine/redis/scripts.js';
import { engineConformance } from './conformance.js';
import { holdScript, waitReady } from './waits.js';

const server = fileFixture('redis-server', () => startRedisServer());
let prefixes = 0;

// One server for the file; a distinct key prefix per engine keeps the tests apart.
engineConformance('redis', async (opts) => {
  const engine = await createRedisEngine({ url: server().url, ...opts, prefix: `t${++prefixes}` });
  return { engine, cleanup: () => engine.close() };
});

const OPTS: EngineOptions = { snapshotEvery: 3, streamMaxLen: 6 };

const ops = (n: number): UserOp[] => [
  { type: 'join', uid: 'u', conv: 'c', head: 0, category: 'private', large: false },
  ...Array.from({ length: n }, (_, i): UserOp => ({ type: 'message', uid: 'u', conv: 'c', lastSeq: i + 1, readSeq: 0, mentionSeqs: [] })),
];

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

/** The AOF's size once Redis stopped appending to it (an everysec write can be postponed a little). */
async function settledAofSize(dir: string): Promise<number> {
  const file = await aofFile(dir);
  let last = -1;
  for (let stable = 0; stable < 4; ) {
    await delay(50);
    const size = (await stat(file)).size;
    stable = size === last ? stable + 1 : 0;
    last = size;
  }
  return last;
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
      await engine.ensureConversation('c', 'group');
      await engine.changeMembers('c', ['u'], []);
      await engine.recordMessage('c', 10);
      await engine.applyUserOps([...ops(10), join('w', 'c')]);
      const before = await engine.userState('u');
      const other = await engine.position('w');
      // A client that caught up, and one that is a few entries behind.
      const caughtUp = await catchUp(engine, 'u', null, new Map());
      expect(caughtUp.states).toEqual(before.states);
      const behind = { epoch: before.epoch, version: before.version - 3 };

      if (how === 'kill') await own.kill();
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
      expect(await engine.getConversation('c')).toEqual({ conv: 'c', maxSeq: 10, large: false, category: 'group', memberCount: 1 });
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
      const size = await settledAofSize(own.dir);
      // Versions 7..11: a client pulls them, then the crash loses them (the OS dropped the
      // unsynced tail of the AOF, simulated by cutting the file back).
      await engine.applyUserOps([6, 7, 8, 9, 10].map((seq): UserOp => ({ type: 'message', uid: 'u', conv: 'c', lastSeq: seq, readSeq: 0, mentionSeqs: [seq] })));
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
      // Redis stays down a while with the calls waiting (nothing to wait for: they must not settle).
      await delay(200);
      await own.restart();
      const [r] = await applied;
      const p = await pulled;
      const pos = await position;
      expect(r).toMatchObject({ changed: true, version: old.version + 1 });
      expect(r?.epoch).not.toBe(old.epoch);
      expect(p.epoch).toBe(r?.epoch);
      expect(p.snapshot).toBeDefined();
      expect(pos).toEqual({ epoch: r?.epoch, version: old.version + 1 });
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
        expect(after.snapshot).toBeDefined();
        expect(after.version).toBe(old.version + 1); // the resent script did run
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

  it('without persistence a lost stream gets a new epoch, and an old cursor gets a snapshot', async () => {
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
      expect(lost.epoch).not.toBe(old.epoch);
      expect(lost).toMatchObject({ snapshot: { v: 0, convs: [] }, entries: [], version: 0, more: false });
      // Even once the new stream is past the old cursor's version, the old cursor never gets a delta.
      await engine.applyUserOps(ops(9));
      const later = await engine.pull('u', old, 100);
      expect(later.epoch).toBe(lost.epoch);
      expect(later.snapshot).toBeDefined();
      expect(later.version).toBe(10);
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
      const runId = await inspect.hget(k.meta, 'rid');
      expect(runId).toMatch(/^[0-9a-f]{40}$/);
      expect((await engine.position('u')).epoch).toBe(first.epoch);
      for (const stale of ['another-run', null]) {
        const before = await engine.position('u');
        const stream = await inspect.xrange(k.stream, '-', '+');
        if (stale === null) await inspect.hdel(k.meta, 'rid');
        else await inspect.hset(k.meta, 'rid', stale);
        const { first: p, states } = await catchUp(engine, 'u', before, new Map(client.states.map((s) => [s.conv, s])));
        expect(p.epoch).not.toBe(before.epoch);
        expect(p.snapshot).toBeDefined();
        expect(states).toEqual((await engine.userState('u')).states);
        expect(await engine.position('u')).toEqual({ epoch: p.epoch, version: before.version });
        expect(await inspect.hget(k.meta, 'rid')).toBe(runId);
        expect(await inspect.xrange(k.stream, '-', '+')).toEqual(stream);
        const [next] = await engine.applyUserOps([message('u', 'c', 100 + before.version)]);
        expect(next).toMatchObject({ epoch: p.epoch, version: before.version + 1 });
      }
    });
  });

  it('trims the stream and the snapshot list exactly as the memory engine does', async () => {
    const opts = { snapshotEvery: 3, streamMaxLen: 7 };
    await withInspector('trim', opts, async (engine, inspect) => {
      // MemoryEngine.maybeSnapshot, for one conversation and one change per op.
      let snaps: number[] = [];
      let base = 0;
      const k = userKeys('trim', 'u');
      for (let v = 1; v <= 40; v++) {
        const op: UserOp = v === 1 ? ops(0)[0]! : { type: 'message', uid: 'u', conv: 'c', lastSeq: v, readSeq: 0, mentionSeqs: [] };
        await engine.applyUserOps([op]);
        if (v - (snaps.at(-1) ?? 0) >= Math.max(opts.snapshotEvery, 1)) {
          snaps.push(v);
          for (const snap of snaps) if (snap > base && v - snap >= opts.streamMaxLen) base = snap;
          snaps = snaps.filter((snap) => snap >= base);
        }
        const ids = (await inspect.xrange(k.stream, '-', '+')).map(([id]) => id);
        const expected: string[] = base > 0 ? [`${base}-1`] : [];
        for (let w = base + 1; w <= v; w++) {
          expected.push(`${w}-0`);
          if (snaps.includes(w)) expected.push(`${w}-1`);
        }
        expect(ids, `stream at v${v}`).toEqual(expected);
        expect((await inspect.lrange(k.snaps, 0, -1)).map(Number), `snapshots at v${v}`).toEqual(snaps);
        expect(Number((await inspect.hget(k.meta, 'base')) ?? 0)).toBe(base);
      }
    });
  });

  it('keeps the derived keys exact: member count, large set, no zero category fields (randomized)', async () => {
    // user_apply writes these only when they change (net deltas, flag changes), so check the raw
    // keys against the records after random ops, not just what the Engine API reports.
    await withInspector('derived', { snapshotEvery: 7, streamMaxLen: 10 }, async (engine, inspect) => {
      await randomizedOps(engine, mulberry32(7), 600);
      for (const uid of ['u1', 'u2', 'u3']) {
        const k = userKeys('derived', uid);
        const records = (await inspect.hvalsBuffer(k.convs)).map(decodeRecord);
        const members = records.filter((r) => r.member);
        expect(Number((await inspect.hget(k.meta, 'members')) ?? 0), uid).toBe(members.length);
        const large = members.filter((r) => r.large).map((r) => r.conv);
        expect(sorted(await inspect.smembers(k.large)), uid).toEqual(sorted(large));
        expect(sorted((await engine.pull(uid, null, 0)).largeConvs), uid).toEqual(sorted(large));
        const cats: Record<string, string> = {};
        for (const [field, value] of Object.entries(await inspect.hgetall(k.totals))) if (field.startsWith('cat:')) cats[field] = value;
        const expected: Record<string, number> = {};
        for (const r of members) {
          if (r.large || r.muted || r.lastSeq <= r.deletedSeq) continue;
          const unread = Math.max(0, r.lastSeq - r.readSeq);
          if (unread > 0) expected[`cat:${r.category}`] = (expected[`cat:${r.category}`] ?? 0) + unread;
        }
        expect(Object.fromEntries(Object.entries(cats).map(([f, v]) => [f, Number(v)])), uid).toEqual(expected);
      }
    });
  });
});

describe('redis engine scripts', () => {
  it('the epoch rotation lives only in lib/epoch.lua, prepended to exactly the scripts that read the epoch', async () => {
    const dir = new URL('../../server/engine/redis/lua/', import.meta.url);
    const prelude = await readFile(new URL('lib/epoch.lua', dir), 'utf8');
    const sources = loadScriptSources();
    const epochScripts: ScriptName[] = ['userApply', 'pull', 'userState', 'position'];
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      const body = await readFile(new URL(SCRIPTS[name].file, dir), 'utf8');
      // No script body writes the epoch itself; it calls userMeta from the prelude.
      expect(body, name).not.toMatch(/'epoch',\s*epoch/);
      if (epochScripts.includes(name)) {
        expect(sources[name], name).toBe(prelude + body);
        expect(body, name).toMatch(/userMeta\(KEYS\[1\], ARGV\[1\], ARGV\[2\]/);
      } else {
        expect(sources[name], name).toBe(body);
      }
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
