import { Redis } from 'ioredis';
import { pino } from 'pino';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import { Persister } from '../../server/durable/persister.js';
import { PgStore } from '../../server/durable/pg-store.js';
import { migrate } from '../../server/durable/schema.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { Metrics } from '../../server/metrics/metrics.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { startPostgres } from '../../test/helpers/postgres-server.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { LatencyHistogram } from '../lib/histogram.js';
import { atLeast, atMost, emptyReport, fmt, type Section } from '../lib/section.js';
import { fmtMs, fmtRate } from '../lib/table.js';

const silent = pino({ level: 'silent' });
const ENGINE = { snapshotEvery: 10, streamMaxLen: 2000, storeTimeoutMs: 15_000 };

/**
 * The durable tier (docs/durable.md), in one process on one redis-server and one PostgreSQL:
 * ingest with the tier on against off (same engine code, another key prefix); persisted pairs
 * per second against a raw multi-row upsert of the same rows; restore latency of a user with 10
 * and with 500 conversations; Redis bytes per registered (user, conversation) pair once 90% of
 * the users went cold.
 */
export const durableSection: Section = {
  id: 'durable',
  title: 'Durable tier — ingest on vs off, persisted pairs/s vs raw upsert, restore latency, Redis bytes per pair',
  inDefaultPlan: true,
  async run(ctx) {
    const quick = ctx.options.quick;
    const convs = quick ? 2_000 : 5_000;
    const rounds = quick ? 3 : 6;
    const report = emptyReport(this.id, this.title);
    const [redis, postgres] = await Promise.all([startRedisServer(), startPostgres()]);
    const admin = new Redis(redis.url);
    const engines: RedisEngine[] = [];
    let pgStore: PgStore | undefined;
    try {
      const url = await postgres.createDatabase('bench');
      pgStore = PgStore.connect(url, { max: 8 });
      await migrate(pgStore.pool);
      const metrics = new Metrics({ processMetrics: false });
      const plain = await createRedisEngine({ url: redis.url, prefix: 'off', ...ENGINE });
      const durable = await createRedisEngine({
        url: redis.url,
        prefix: 'on',
        ...ENGINE,
        durable: { backing: pgStore, activityEveryMs: 60_000 },
      });
      engines.push(plain, durable);
      const store = durable.durableStore();
      await store.markIntact(true);
      const persister = new Persister(store, pgStore, { intervalMs: 200, batch: 2_000, backlogWarn: 1e12 }, silent, metrics);

      // 1. Ingest, tier off vs on (its drainer running alongside, as in a server).
      const ingest = async (engine: RedisEngine, tag: string): Promise<number> => {
        const sync = new SyncService(engine, { largeGroupThreshold: 500 });
        for (let i = 0; i < convs; i += 200) {
          await Promise.all(
            Array.from({ length: Math.min(200, convs - i) }, (_, k) =>
              sync.changeMembers(`${tag}${i + k}`, { add: [`${tag}a${i + k}`, `${tag}b${i + k}`], remove: [] }),
            ),
          );
        }
        const started = performance.now();
        for (let seq = 1; seq <= rounds; seq++) {
          const inFlight: Promise<void>[] = [];
          for (let i = 0; i < convs; i++) inFlight.push(sync.postMessages([{ conv: `${tag}${i}`, seq, sender: `${tag}b${i}` }]));
          await Promise.all(inFlight);
        }
        return (convs * rounds) / ((performance.now() - started) / 1000);
      };
      ctx.log('  durable: ingest, tier off');
      const off = await ingest(plain, 'x');
      ctx.log('  durable: ingest, tier on');
      persister.start();
      const on = await ingest(durable, 'x');
      await persister.stop();
      await persister.drainAll(Date.now() + 120_000);

      // 2. Persisted pairs per second vs a raw upsert of the same rows.
      ctx.log('  durable: persist rate');
      const sync = new SyncService(durable, { largeGroupThreshold: 500 });
      const inFlight: Promise<unknown>[] = [];
      for (let i = 0; i < convs; i++) inFlight.push(sync.read(`xa${i}`, `x${i}`, rounds));
      await Promise.all(inFlight);
      const marks = (await store.backlog([''])).marks;
      const drainStarted = performance.now();
      await persister.drainAll(Date.now() + 120_000);
      const drainSeconds = (performance.now() - drainStarted) / 1000;
      const persistRate = marks / drainSeconds;
      const raw = await rawUpsertRate(pgStore, marks);

      // 3. Restore latency: users with 10 and with 500 conversations, their keys dropped.
      const restore = new Map<number, LatencyHistogram>();
      for (const size of [10, 500]) {
        ctx.log(`  durable: restore latency, ${size} conversations`);
        const users = quick ? 20 : 50;
        const h = new LatencyHistogram();
        const tag = `r${size}`;
        for (let c = 0; c < size; c++) await sync.changeMembers(`${tag}c${c}`, { add: Array.from({ length: users }, (_, u) => `${tag}u${u}`), remove: [] });
        await Promise.all(Array.from({ length: size }, (_, c) => sync.postMessages([{ conv: `${tag}c${c}`, seq: 3, sender: `${tag}u0` }])));
        await persister.drainAll(Date.now() + 120_000);
        for (let u = 1; u < users; u++) {
          const tagKey = `on:{u:${tag}u${u}}`;
          await admin.del(`${tagKey}:m`, `${tagKey}:c`, `${tagKey}:s`, `${tagKey}:p`, `${tagKey}:L`);
          const t0 = performance.now();
          await durable.position(`${tag}u${u}`);
          h.recordMs(performance.now() - t0);
        }
        restore.set(size, h);
      }

      // 4. Redis bytes per registered pair: 10 conversations per user, then 90% of them cold.
      ctx.log('  durable: Redis memory with 10% of users active');
      const population = quick ? 2_000 : 10_000;
      await admin.flushall();
      await store.markIntact(true);
      const base = await usedMemory(admin);
      for (let g = 0; g < population / 10; g++) {
        const members = Array.from({ length: 10 }, (_, k) => `m${g * 10 + k}`);
        for (let c = 0; c < 10; c++) await sync.changeMembers(`g${g}c${c}`, { add: members, remove: [] });
      }
      await persister.drainAll(Date.now() + 300_000);
      const pairs = population * 10;
      const full = await usedMemory(admin);
      const beforeBytes = (full - base) / pairs;
      // 90% go cold: every user's activity is put back an hour, then the active 10% touch.
      const sweep = new ColdSweep(store, pgStore, { coldAfterSeconds: 60, sweepSeconds: 60 }, silent, metrics);
      let evicted = 0;
      for (let round = 0; round < 100; round++) {
        const n = await sweep.sweepOnce(Date.now() + 3_600_000 + round);
        evicted += n;
        if (n === 0) break;
      }
      for (let u = 0; u < population / 10; u++) await durable.position(`m${u}`);
      const after = await usedMemory(admin);
      const afterBytes = (after - base) / pairs;

      report.method.push(
        `One redis-server and one private PostgreSQL on the same 2 cores, the engines in this process. Ingest: ${fmt.int(convs)} one-to-one conversations, ${rounds} rounds of one message each, all submitted at once through SyncService (group commit); the tier-on engine's drainer runs alongside (200 ms passes). Persist: ${fmt.int(marks)} dirty records (one read each), drained to PostgreSQL by the Persister; the raw baseline upserts the same number of rows with the same multi-row unnest statement from one client, in batches of 2,000. Restore: a user's keys deleted, then one position() call (load from PostgreSQL, user_restore.lua, read). Memory: INFO used_memory over ${fmt.int(pairs)} (user, conversation) pairs (groups of 10), before and after the cold sweep removed the users idle for an hour, then 10% touching again.`,
      );
      report.tables.push({
        caption: 'Ingest and persistence',
        table: {
          header: ['measure', 'value', 'baseline', 'ratio'],
          rows: [
            ['ingest, messages/s (tier on vs off)', fmtRate(on), fmtRate(off), fmt.ratio(on / off)],
            ['persisted pairs/s (drainer vs raw upsert)', fmtRate(persistRate), fmtRate(raw), fmt.ratio(persistRate / raw)],
          ],
        },
      });
      report.tables.push({
        caption: 'Restore latency of one user',
        table: {
          header: ['conversations', 'restores', 'p50', 'p99', 'max'],
          rows: [...restore].map(([size, h]) => {
            const s = h.summary();
            return [String(size), fmt.int(s.count), `${fmtMs(s.p50)} ms`, `${fmtMs(s.p99)} ms`, `${fmtMs(s.max)} ms`];
          }),
        },
      });
      report.tables.push({
        caption: 'Redis bytes per registered (user, conversation) pair',
        table: {
          header: ['state', 'bytes per pair', 'users evicted'],
          rows: [
            ['every user in Redis', beforeBytes.toFixed(0), '0'],
            ['10% active (90% cold, evicted)', afterBytes.toFixed(0), fmt.int(evicted)],
          ],
        },
      });
      report.verdicts.push(
        atLeast('ingest with the durable tier on vs off', on / off, 0.9, fmt.ratio),
        atLeast('persisted pairs/s vs raw multi-row upsert', persistRate / raw, 0.8, fmt.ratio),
        atMost('Redis bytes per registered pair, 10% active (vs ~300 B without the tier)', afterBytes, 60, (n) => `${n.toFixed(0)} B`),
      );
      report.data = {
        ingest: { on, off },
        persist: { marks, persistRate, raw },
        restore: Object.fromEntries([...restore].map(([k, h]) => [k, h.summary()])),
        memory: { pairs, beforeBytes, afterBytes, evicted },
      };
    } finally {
      admin.disconnect();
      for (const e of engines) await e.close();
      await pgStore?.close();
      await Promise.all([redis.stop(), postgres.stop()]);
    }
    return report;
  },
};

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
}

/** Rows per second of the drainer's own upsert statement, from one client, on fresh keys. */
async function rawUpsertRate(pgStore: PgStore, rows: number): Promise<number> {
  const n = Math.max(1, rows);
  const started = performance.now();
  for (let i = 0; i < n; i += 2_000) {
    const count = Math.min(2_000, n - i);
    const snapshots = Array.from({ length: count }, (_, k) => ({
      uid: `raw${i + k}`,
      w: Date.now(),
      records: new Map([[`rawc${i + k}`, '1000|5|3|-1|1|1||']]),
    }));
    await pgStore.writeUsers(snapshots);
  }
  return n / ((performance.now() - started) / 1000);
}
