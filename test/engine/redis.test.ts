import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine, EngineOptions, UserOp } from '../../server/engine/engine.js';
import { Redis } from 'ioredis';
import { userKeys } from '../../server/engine/redis/keys.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import { REDIS_NOT_FOUND, startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { engineConformance } from './conformance.js';

let server: RedisServer | undefined;
let prefixes = 0;

beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  await server?.stop();
});

// One server for the file; a distinct key prefix per engine keeps the tests apart.
engineConformance('redis', async (opts) => {
  if (!server) throw new Error('redis-server fixture not started');
  const engine = await createRedisEngine({ url: server.url, ...opts, prefix: `t${++prefixes}` });
  return { engine, cleanup: () => engine.close() };
});

const OPTS: EngineOptions = { snapshotEvery: 3, streamMaxLen: 6 };

const ops = (n: number): UserOp[] => [
  { type: 'join', uid: 'u', conv: 'c', head: 0, category: 'private', large: false },
  ...Array.from({ length: n }, (_, i): UserOp => ({ type: 'message', uid: 'u', conv: 'c', lastSeq: i + 1, readSeq: 0, mentionSeqs: [] })),
];

/** Bounded wait for the client to reconnect after the server came back. */
async function waitReady(engine: Engine, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await engine.ready())) {
    if (Date.now() > deadline) throw new Error('engine did not become ready');
    await delay(25);
  }
}

async function waitNotReady(engine: Engine, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (await engine.ready()) {
    if (Date.now() > deadline) throw new Error('engine still ready after the server went away');
    await delay(25);
  }
}

describe('redis engine across restarts', () => {
  it.each([
    ['everysec', 'restart'],
    ['always', 'kill'],
  ] as const)('with AOF %s the data survives a %s', async (aof, how) => {
    const own = await startRedisServer({ aof });
    const engine = await createRedisEngine({ url: own.url, ...OPTS });
    try {
      await engine.ensureConversation('c', 'group');
      await engine.changeMembers('c', ['u'], []);
      await engine.recordMessage('c', 10);
      await engine.applyUserOps(ops(10));
      const before = await engine.userState('u');
      const cursor = { epoch: before.epoch, version: 8 };
      const pulled = await engine.pull('u', cursor, 100);
      if (how === 'kill') await own.kill();
      await own.restart();
      await waitReady(engine);
      expect(await engine.userState('u')).toEqual(before);
      expect(await engine.pull('u', cursor, 100)).toEqual(pulled);
      expect(await engine.getConversation('c')).toEqual({ conv: 'c', maxSeq: 10, large: false, category: 'group', memberCount: 1 });
      const [next] = await engine.applyUserOps([{ type: 'read', uid: 'u', conv: 'c', seq: 10 }]);
      expect(next).toMatchObject({ changed: true, epoch: before.epoch, version: before.version + 1 });
    } finally {
      await engine.close();
      await own.stop();
    }
  });

  it('without persistence a lost stream gets a new epoch, and an old cursor gets a snapshot', async () => {
    const own = await startRedisServer();
    const engine = await createRedisEngine({ url: own.url, ...OPTS });
    try {
      await engine.applyUserOps(ops(4));
      const old = await engine.position('u');
      expect(old.version).toBe(5);
      await own.kill();
      await waitNotReady(engine);
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
    } finally {
      await engine.close();
      await own.stop();
    }
  });
});

describe('redis engine storage', () => {
  it('trims the stream and the snapshot list exactly as the memory engine does', async () => {
    if (!server) throw new Error('redis-server fixture not started');
    const opts = { snapshotEvery: 3, streamMaxLen: 7 };
    const engine = await createRedisEngine({ url: server.url, ...opts, prefix: 'trim' });
    const inspect = new Redis(server.url);
    try {
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
    } finally {
      inspect.disconnect();
      await engine.close();
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
