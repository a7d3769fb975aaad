import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalToolbox } from '../../server/admin/toolbox.js';
import { importCommand } from '../../server/cli/import-command.js';
import { reconcileCommand } from '../../server/cli/reconcile-command.js';
import { adminOf } from '../../server/engine/admin.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { mulberry32 } from '../helpers/prng.js';
import { startRedisServer } from '../helpers/redis-server.js';

const THRESHOLD = 500;
// A loaded CI machine can stall Redis for seconds under this bulk load; this file tests import, not store timeouts.
const OPTIONS = { snapshotEvery: 16, streamMaxLen: 2000, streamIdleSeconds: 0, storeTimeoutMs: 30_000 };

interface DataSet {
  convs: { conv: string; members: string[]; category: string; maxSeq: number }[];
  /** uid -> conv -> unread count (absent: everything read). */
  unread: Map<string, Map<string, number>>;
  users: string[];
}

/**
 * A realistic mix: many 1:1 chats, groups of 3–30, a few groups larger than the threshold (read
 * diffusion); most conversations fully read, some with a few unread, heads from tens to tens of
 * thousands.
 */
function generate(seed: number, scale: { users: number; dms: number; groups: number; large: number }): DataSet {
  const rand = mulberry32(seed);
  const pick = (n: number): number => Math.floor(rand() * n);
  const users = Array.from({ length: scale.users }, (_, i) => `u${i}`);
  const convs: DataSet['convs'] = [];
  const unread = new Map<string, Map<string, number>>();
  const add = (conv: string, members: string[], category: string, maxSeq: number): void => {
    convs.push({ conv, members, category, maxSeq });
    for (const uid of members) {
      if (rand() < 0.7) continue;
      const count = 1 + pick(Math.min(maxSeq, 50));
      let m = unread.get(uid);
      if (!m) unread.set(uid, (m = new Map()));
      m.set(conv, count);
    }
  };
  for (let i = 0; i < scale.dms; i++) {
    const a = pick(scale.users);
    const b = (a + 1 + pick(scale.users - 1)) % scale.users;
    add(`dm${i}`, [users[a] as string, users[b] as string], 'private', 1 + pick(200));
  }
  for (let i = 0; i < scale.groups; i++) {
    const size = 3 + pick(28);
    const start = pick(scale.users);
    add(
      `g${i}`,
      Array.from({ length: size }, (_, k) => users[(start + k * 7) % scale.users] as string),
      'group',
      1 + pick(5000),
    );
  }
  for (let i = 0; i < scale.large; i++) {
    const start = pick(scale.users);
    add(
      `big${i}`,
      Array.from({ length: THRESHOLD + 100 }, (_, k) => users[(start + k * 3) % scale.users] as string),
      'channel',
      1 + pick(20000),
    );
  }
  return { convs, unread, users };
}

function expectedTotal(data: DataSet, uid: string): number {
  let total = 0;
  for (const count of data.unread.get(uid)?.values() ?? []) total += count;
  return total;
}

describe('redpoint import on a real redis-server', () => {
  const redis = fileFixture('redis-server', () => startRedisServer());
  let dir: string;
  let engine: RedisEngine;
  let toolbox: LocalToolbox;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'redpoint-import-'));
  });
  afterAll(async () => {
    await engine?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('imports a realistic data set of over 100k pairs, batched and pipelined; reconcile then finds nothing', async () => {
    engine = await createRedisEngine({ url: redis().url, ...OPTIONS, prefix: 'imp' });
    toolbox = new LocalToolbox(engine, adminOf(engine), { ...OPTIONS, largeGroupThreshold: THRESHOLD });
    const data = generate(7, { users: 20_000, dms: 25_000, groups: 3_000, large: 5 });
    const pairs = data.convs.reduce((n, c) => n + c.members.length, 0);
    expect(pairs).toBeGreaterThan(100_000);
    const lines: string[] = [];
    for (const c of data.convs) lines.push(JSON.stringify(c));
    const heads = new Map(data.convs.map((c) => [c.conv, c.maxSeq]));
    for (const [uid, m] of data.unread) {
      for (const [conv, count] of m) {
        const head = heads.get(conv) ?? 0;
        lines.push(JSON.stringify({ uid, conv, readSeq: head - count }));
      }
    }
    const file = join(dir, 'data.jsonl');
    await writeFile(file, `${lines.join('\n')}\n`);

    let output = '';
    const args = { file, dryRun: false, legacy: undefined, batchPairs: 2000, parallel: 4, json: true, progress: false };
    const code = await importCommand(toolbox, args, (t) => (output += t));
    expect(code, output).toBe(0);
    const summary = JSON.parse(output) as { pairs: number; conversations: number; seconds: number; pairsPerSecond: number };
    expect(summary.conversations).toBe(data.convs.length);
    console.log(
      `[import] ${summary.pairs} pairs, ${summary.conversations} conversations in ${summary.seconds.toFixed(1)} s: ${summary.pairsPerSecond} pairs/s`,
    );

    const sync = new SyncService(engine, { largeGroupThreshold: THRESHOLD });
    const rand = mulberry32(11);
    for (let i = 0; i < 300; i++) {
      const uid = data.users[Math.floor(rand() * data.users.length)] as string;
      expect((await sync.unread(uid)).total, uid).toBe(expectedTotal(data, uid));
    }

    output = '';
    const started = performance.now();
    const clean = await reconcileCommand(
      toolbox,
      { users: [], convs: [], all: true, repair: false, rate: 1_000_000, graceMs: 0, cursor: '', json: true, progress: false },
      (t) => (output += t),
      () => false,
    );
    const report = JSON.parse(output) as { users: number; conversations: number; findings: unknown[] };
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `[reconcile] ${report.users} users + ${report.conversations} conversations in ${seconds.toFixed(1)} s: ${Math.round((report.users + report.conversations) / seconds)} ids/s`,
    );
    expect(report.findings).toEqual([]);
    expect(clean).toBe(0);
    expect(report.users).toBe(new Set(data.convs.flatMap((c) => c.members)).size);
  }, 240_000);

  it('--from-counters converts the classic layout; /unread equals the legacy counters for consistent users, and the others are reported', async () => {
    const legacyEngine = await createRedisEngine({ url: redis().url, ...OPTIONS, prefix: 'leg' });
    const legacyToolbox = new LocalToolbox(legacyEngine, adminOf(legacyEngine), { ...OPTIONS, largeGroupThreshold: 4 });
    try {
      const data = generate(3, { users: 400, dms: 500, groups: 80, large: 0 });
      const raw = new Redis(redis().url);
      const inconsistent = new Set<string>();
      try {
        const pipe = raw.pipeline();
        let n = 0;
        for (const [uid, m] of data.unread) {
          pipe.hset(`legacy:unread:{${uid}}`, Object.fromEntries(m));
          let total = [...m.values()].reduce((a, b) => a + b, 0);
          // Drift, as INCR/DECR counters do: a few totals disagree with their details.
          if (n++ % 17 === 0) {
            total += 3;
            inconsistent.add(uid);
          }
          pipe.set(`legacy:total_unread:{${uid}}`, String(total));
        }
        await pipe.exec();
      } finally {
        raw.disconnect();
      }
      const file = join(dir, 'convs.jsonl');
      await writeFile(file, `${data.convs.map((c) => JSON.stringify(c)).join('\n')}\n`);
      // The legacy import as the CLI runs it: its exit code and what it printed.
      const importLegacy = async (): Promise<{ code: number; output: string }> => {
        let output = '';
        const options = {
          file,
          dryRun: false,
          legacy: { url: redis().url, counters: 'legacy:unread:{*}', totals: 'legacy:total_unread:{*}' },
          batchPairs: 500,
          parallel: 2,
          json: true,
          progress: false,
        };
        const code = await importCommand(legacyToolbox, options, (t) => (output += t));
        return { code, output };
      };
      const { code, output } = await importLegacy();
      expect(code, output).toBe(0);
      const summary = JSON.parse(output) as { legacy: { users: number; inconsistent: { uid: string }[] } };
      expect(summary.legacy.users).toBe(data.unread.size);
      expect(new Set(summary.legacy.inconsistent.map((u) => u.uid))).toEqual(inconsistent);

      const sync = new SyncService(legacyEngine, { largeGroupThreshold: 4 });
      // Importing again changes nothing (max-merge).
      const before = await Promise.all(data.users.slice(0, 50).map((uid) => sync.unread(uid)));
      expect((await importLegacy()).code).toBe(0);
      // (The version may move: a repeated join raises a read-diffused member's stored lower bound
      // of lastSeq to the head, as re-adding a member does. What users see stays.)
      const counts = (u: Awaited<ReturnType<typeof sync.unread>>): unknown => ({ ...u, version: 0 });
      expect((await Promise.all(data.users.slice(0, 50).map((uid) => sync.unread(uid)))).map(counts)).toEqual(before.map(counts));
      for (const uid of data.users) {
        if (inconsistent.has(uid)) continue;
        const shown = await sync.unread(uid);
        expect(shown.total, uid).toBe(expectedTotal(data, uid));
        for (const c of shown.conversations) expect(c.unread, `${uid} in ${c.conv}`).toBe(data.unread.get(uid)?.get(c.conv) ?? 0);
      }
    } finally {
      await legacyEngine.close();
    }
  }, 120_000);
});
