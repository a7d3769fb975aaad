import { Redis } from 'ioredis';
import { pino } from 'pino';
import { ColdSweep } from '../../server/durable/cold-sweep.js';
import { DRAIN_PIPELINE, Persister } from '../../server/durable/persister.js';
import { PgStore } from '../../server/durable/pg-store.js';
import { migrate } from '../../server/durable/schema.js';
import type { PersistedRecord } from '../../server/engine/durable-backing.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { Metrics } from '../../server/metrics/metrics.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { startPostgres } from '../../test/helpers/postgres-server.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { ChangeLag } from '../lib/change-lag.js';
import { LatencyHistogram } from '../lib/histogram.js';
import { cpuMicros } from '../lib/proc.js';
import { redisStats, statsConnection, statsDelta } from '../lib/redis-info.js';
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
      // The drain lag under ingest, as the drainer measures it (redpoint_persist_lag_seconds: from a
      // record's last change to its mark cleared after PostgreSQL committed it), every record
      // drained while the tier-on runs ingest and just after (what they left).
      const lag = new LatencyHistogram();
      let lagCaptured = false;
      const recordLag = new LatencyHistogram();
      // And every acknowledged change's wait, from its acknowledgement (the true window of loss):
      // under the saturating ingest, and at a steady load below it.
      const changeLag = new ChangeLag();
      const steadyLag = new ChangeLag();
      let changes: ChangeLag | undefined;
      let unwritten = 0;
      const takeRecords = store.takeRecords.bind(store);
      store.takeRecords = async (shard, skip, limit) => {
        const startedAt = Date.now();
        const records = await takeRecords(shard, skip, limit);
        changes?.taken(records, startedAt);
        return records;
      };
      const clearRecords = store.clearRecords.bind(store);
      store.clearRecords = async (shard, records) => {
        changes?.written(records, Date.now());
        const cleared = await clearRecords(shard, records);
        const now = Date.now();
        if (lagCaptured) for (const r of records) recordLag.recordMs(Math.max(0, now - r.w));
        return cleared;
      };
      const observeLag = metrics.persistLag.observe.bind(metrics.persistLag);
      metrics.persistLag.observe = ((value: number) => {
        if (lagCaptured) lag.recordMs(value * 1000);
        observeLag(value);
      }) as typeof metrics.persistLag.observe;

      // 1. Ingest, tier off vs on (its drainer running alongside, as in a server).
      // The conversations of a run, made before it (tier on: drained too, so the run's time and
      // CPU are its messages', as they are with the tier off).
      const setUp = async (engine: RedisEngine, tag: string): Promise<void> => {
        const sync = new SyncService(engine, { largeGroupThreshold: 500 });
        for (let i = 0; i < convs; i += 200) {
          await Promise.all(
            Array.from({ length: Math.min(200, convs - i) }, (_, k) =>
              sync.changeMembers(`${tag}${i + k}`, { add: [`${tag}a${i + k}`, `${tag}b${i + k}`], remove: [] }),
            ),
          );
        }
        if (engine === durable) await persister.drainAll(Date.now() + 120_000);
      };
      const ingest = async (engine: RedisEngine, tag: string): Promise<{ messages: number; seconds: number }> => {
        const sync = new SyncService(engine, { largeGroupThreshold: 500 });
        const started = performance.now();
        for (let seq = 1; seq <= rounds; seq++) {
          const inFlight: Promise<void>[] = [];
          for (let i = 0; i < convs; i++) {
            const posted = sync.postMessages([{ conv: `${tag}${i}`, seq, sender: `${tag}b${i}` }]);
            inFlight.push(
              lagCaptured
                ? posted.then(() => {
                    const at = Date.now();
                    changeLag.acked(`${tag}a${i}|${tag}${i}`, at);
                    changeLag.acked(`${tag}b${i}|${tag}${i}`, at);
                  })
                : posted,
            );
          }
          await Promise.all(inFlight);
        }
        return { messages: convs * rounds, seconds: (performance.now() - started) / 1000 };
      };
      // Off, on, on, off (ABBA): whatever drifts during the run (the JIT warming up, the heap and
      // Redis growing, other jobs on the machine) weighs on both sides alike. The persist rounds
      // below use the tier-on engine's 'x' conversations.
      const totals = { off: { messages: 0, seconds: 0 }, on: { messages: 0, seconds: 0 } };
      // All the CPU each side spends on its messages: this process, redis-server and PostgreSQL,
      // during the run and, tier on, during the drain of what the run left (the same work, done
      // later). Its ratio is what the tier costs a machine whose cores are all busy.
      const ingestCpu = { off: emptyCost(), on: emptyCost() };
      // Redis INFO for the CPU of each stage, here and in the persist rounds below.
      const redisInfo = statsConnection(redis.url);
      for (const [side, tag] of [
        ['off', 'y'],
        ['on', 'y'],
        ['on', 'x'],
        ['off', 'x'],
      ] as const) {
        ctx.log(`  durable: ingest, tier ${side}`);
        lagCaptured = side === 'on';
        changes = side === 'on' ? changeLag : undefined;
        await setUp(side === 'on' ? durable : plain, tag);
        if (side === 'on') persister.start();
        let run = { messages: 0, seconds: 0 };
        await measure(ingestCpu[side], convs * rounds, redisInfo, postgres.pid() ?? 0, async () => {
          run = await ingest(side === 'on' ? durable : plain, tag);
          if (side === 'on') {
            // What the run left undrained is drained outside its time, as before: each run starts clean.
            await persister.stop();
            await persister.drainAll(Date.now() + 120_000);
          }
        });
        totals[side].messages += run.messages;
        totals[side].seconds += run.seconds;
        if (side === 'on') {
          unwritten += changeLag.settle();
          lagCaptured = false;
          changes = undefined;
        }
      }
      const off = totals.off.messages / totals.off.seconds;
      const on = totals.on.messages / totals.on.seconds;
      const cpuPerMessage = (c: Cost): number => (c.nodeMicros + c.redisMicros + c.postgresMicros) / Math.max(1, c.rows);
      const cpuRatio = cpuPerMessage(ingestCpu.on) / cpuPerMessage(ingestCpu.off);

      // 1b. The lag at a steady load: the saturating ingest above leaves the drainer what CPU the
      // ingest does not take, so its changes wait about as long as the run lasts. A server is run
      // below saturation: here, open loop at half the tier-on rate just measured, one message per
      // 10 ms tick's share, over the 'x' conversations (at seq `rounds` after the ingest).
      ctx.log('  durable: drain lag at a steady load');
      const steadyRate = Math.max(100, Math.round(on / 2));
      const steadySeconds = quick ? 3 : 6;
      {
        const sync = new SyncService(durable, { largeGroupThreshold: 500 });
        changes = steadyLag;
        persister.start();
        const inFlight: Promise<void>[] = [];
        const started = performance.now();
        let sent = 0;
        while (performance.now() - started < steadySeconds * 1000) {
          const due = Math.floor(((performance.now() - started) / 1000) * steadyRate);
          for (; sent < due; sent++) {
            const i = sent % convs;
            const seq = rounds + 1 + Math.floor(sent / convs);
            inFlight.push(
              sync.postMessages([{ conv: `x${i}`, seq, sender: `xb${i}` }]).then(() => {
                const at = Date.now();
                steadyLag.acked(`xa${i}|x${i}`, at);
                steadyLag.acked(`xb${i}|x${i}`, at);
              }),
            );
          }
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        await Promise.all(inFlight);
        await persister.stop();
        await persister.drainAll(Date.now() + 120_000);
        unwritten += steadyLag.settle();
        changes = undefined;
      }

      // 1c. Rosters: a burst of new conversations (what each ingest run above starts with), then
      // the drain of their rosters and their members' records, timed.
      ctx.log('  durable: a burst of rosters');
      const rosterConvs = quick ? 1_000 : 2_000;
      let rosterSeconds = 0;
      {
        const sync = new SyncService(durable, { largeGroupThreshold: 500 });
        for (let i = 0; i < rosterConvs; i += 200) {
          await Promise.all(
            Array.from({ length: Math.min(200, rosterConvs - i) }, (_, k) =>
              sync.changeMembers(`r${i + k}`, { add: [`ra${i + k}`, `rb${i + k}`], remove: [] }),
            ),
          );
        }
        const started = performance.now();
        await persister.drainAll(Date.now() + 120_000);
        rosterSeconds = (performance.now() - started) / 1000;
      }

      // 2. Persisted pairs per second vs a raw upsert of the same rows, over several rounds of
      // reads (each round one changed record per user), the drainer and the baseline taking
      // turns to go first; CPU per row of each stage (this process, redis-server, PostgreSQL).
      ctx.log('  durable: persist rate');
      const sync = new SyncService(durable, { largeGroupThreshold: 500 });
      const postgresPid = postgres.pid() ?? 0;
      const drain = emptyCost();
      const raw = emptyCost();
      // Even: the drainer and the baseline go first equally often (whoever goes first meets the
      // pages and WAL as the previous round left them).
      const persistRounds = quick ? 2 : 6;
      for (let round = 1; round <= persistRounds; round++) {
        await Promise.all(Array.from({ length: convs }, (_, i) => sync.read(`xa${i}`, `x${i}`, round)));
        // The baseline's rows: exactly what the drainer is about to write.
        const marks = (await store.backlog([''])).marks;
        const snapshots = await store.takeRecords('', 0, marks);
        const drainRun = (): Promise<void> => measure(drain, marks, redisInfo, postgresPid, () => persister.drainAll(Date.now() + 120_000));
        const rawRun = (): Promise<void> => measure(raw, snapshots.length, redisInfo, postgresPid, () => rawUpsert(pgStore as PgStore, snapshots));
        if (round % 2 === 1) {
          await drainRun();
          await rawRun();
        } else {
          await rawRun();
          await drainRun();
        }
      }
      redisInfo.disconnect();
      const persistRate = drain.rows / drain.seconds;
      const rawRate = raw.rows / raw.seconds;
      const rawInsert = await rawInsertRate(pgStore, convs);

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
        `One redis-server and one private PostgreSQL on the same 2 cores, the engines in this process. Ingest: ${fmt.int(convs)} one-to-one conversations, ${rounds} rounds of one message each, all submitted at once through SyncService (group commit); the tier-on engine's drainer runs alongside (200 ms passes); twice per engine, in the order off, on, on, off, rates over the sum of both runs; CPU per message sums this process, redis-server and PostgreSQL over each run and, tier on, over the drain of what the run left (the drain's work is the tier's cost even when it waits), so its ratio is the ingest rate a machine with every core busy can sustain with the drain keeping up; the drain lag is every change acknowledged during the tier-on runs and during ${steadySeconds} s of open-loop messages at half the tier-on rate, from its acknowledgement to the end of the first PostgreSQL write that holds it (bench/lib/change-lag.ts; it may over-state, never under-state), and, as the drainer's metric counts it, every record it cleared during those runs and just after (what they left), from its last change (its mark's score, ms) to its mark's clear. Rosters: ${fmt.int(rosterConvs)} new one-to-one conversations at once, then the drain of their rosters and records, timed. Persist: ${persistRounds} rounds of ${fmt.int(convs)} dirty records (one read each per round), drained to PostgreSQL by the Persister, the drainer and the baseline taking turns to go first; the raw baseline upserts the same rows (read from Redis just before the drain; PostgreSQL holds them, so both take the upsert's update path) with the drainer's own multi-row unnest statement, in its chunks of ${fmt.int(DRAIN_PIPELINE.recordsPerChunk)} with ${DRAIN_PIPELINE.chunksInFlight} in flight; for reference, the same statement inserting as many new rows from one client in batches of 2,000. CPU per row by stage: this process (process.cpuUsage: the drainer, or the baseline's client), redis-server (INFO used_cpu) and PostgreSQL's process tree (/proc, 10 ms ticks); the last column is the pipeline's bound if the three did not share 2 cores (1 / the busiest stage's CPU per row), a projection, not a measurement. Restore: a user's keys deleted, then one position() call (load from PostgreSQL, user_restore.lua, read). Memory: INFO used_memory over ${fmt.int(pairs)} (user, conversation) pairs (groups of 10), before and after the cold sweep removed the users idle for an hour, then 10% touching again.`,
      );
      report.tables.push({
        caption: 'Ingest and persistence',
        table: {
          header: ['measure', 'value', 'baseline', 'ratio'],
          rows: [
            ['ingest, messages/s (tier on vs off)', fmtRate(on), fmtRate(off), fmt.ratio(on / off)],
            [
              'CPU per message, all of it (this process, Redis, PostgreSQL; tier on: its whole drain included), µs (tier on vs off)',
              cpuPerMessage(ingestCpu.on).toFixed(1),
              cpuPerMessage(ingestCpu.off).toFixed(1),
              fmt.ratio(cpuRatio),
            ],
            ['ingest a saturated machine sustains with the drain keeping up (1 / the CPU ratio above)', '', '', fmt.ratio(1 / cpuRatio)],
            ['persisted pairs/s (drainer vs raw upsert of the same rows)', fmtRate(persistRate), fmtRate(rawRate), fmt.ratio(persistRate / rawRate)],
            ['persisted pairs/s (drainer vs raw insert of new rows)', fmtRate(persistRate), fmtRate(rawInsert), fmt.ratio(persistRate / rawInsert)],
            [
              `new 1:1 conversations drained/s (${fmt.int(rosterConvs)} rosters and their ${fmt.int(rosterConvs * 2)} records)`,
              fmtRate(rosterConvs / rosterSeconds),
              '',
              '',
            ],
          ],
        },
      });
      const perRow = (c: Cost, micros: number): string => (micros / Math.max(1, c.rows)).toFixed(1);
      report.tables.push({
        caption: `Ingest: CPU per message by stage, µs (${fmt.int(totals.on.messages)} messages a side; tier on: the run and the drain of what it left)`,
        table: {
          header: ['tier', 'this process', 'redis-server', 'PostgreSQL', 'all'],
          rows: (['off', 'on'] as const).map((side) => {
            const c = ingestCpu[side];
            return [side, perRow(c, c.nodeMicros), perRow(c, c.redisMicros), perRow(c, c.postgresMicros), cpuPerMessage(c).toFixed(1)];
          }),
        },
      });
      const bound = (c: Cost): number => (1e6 / Math.max(c.nodeMicros, c.redisMicros, c.postgresMicros)) * c.rows;
      report.tables.push({
        caption: `Persisting: CPU per row by stage, µs (${persistRounds} rounds of ${fmt.int(convs)} changed rows each)`,
        table: {
          header: ['who', 'rows/s', 'this process', 'redis-server', 'PostgreSQL', 'rows/s if each stage had its own core'],
          rows: [
            [
              'drainer',
              fmtRate(persistRate),
              perRow(drain, drain.nodeMicros),
              perRow(drain, drain.redisMicros),
              perRow(drain, drain.postgresMicros),
              fmtRate(bound(drain)),
            ],
            ['raw upsert', fmtRate(rawRate), perRow(raw, raw.nodeMicros), perRow(raw, raw.redisMicros), perRow(raw, raw.postgresMicros), fmtRate(bound(raw))],
          ],
        },
      });
      const lagSummary = lag.summary();
      const recordLagSummary = recordLag.summary();
      const lagRow = (what: string, l: typeof lagSummary): string[] => [
        what,
        fmt.int(l.count),
        `${fmtMs(l.p50)} ms`,
        `${fmtMs(l.p99)} ms`,
        `${fmtMs(l.max)} ms`,
      ];
      const changeLagSummary = changeLag.lag.summary();
      const steadyLagSummary = steadyLag.lag.summary();
      report.tables.push({
        caption: `Drain lag (tier on, 200 ms passes): every acknowledged change to the PostgreSQL write that holds it (the window of loss), at a steady load and under the saturating ingest; then, as redpoint_persist_lag_seconds counts, a drained mark from its record's last change (saturating ingest)${unwritten > 0 ? ` (${fmt.int(unwritten)} changes found no write after them)` : ''}`,
        table: {
          header: ['what', 'drained', 'p50', 'p99', 'max'],
          rows: [
            lagRow(`acknowledged changes, steady load (${fmt.int(steadyRate)} messages/s, half the tier-on rate), from the acknowledgement`, steadyLagSummary),
            lagRow('acknowledged changes, saturating ingest, from the acknowledgement', changeLagSummary),
            lagRow("users' records (read positions, flags), from the last change", recordLagSummary),
            lagRow('every mark (records, heads, rosters), from the last change', lagSummary),
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
        atLeast('persisted pairs/s vs raw multi-row upsert', persistRate / rawRate, 0.8, fmt.ratio),
        atMost('drain lag p99 at half the ingest rate, each acknowledged change', steadyLagSummary.p99, 1_000, (ms) => `${fmtMs(ms)} ms`),
        atMost('drain lag p99 under saturating ingest, each acknowledged change', changeLagSummary.p99, 1_000, (ms) => `${fmtMs(ms)} ms`),
        atMost("drain lag p99 under ingest, users' records (from the last change)", recordLagSummary.p99, 1_000, (ms) => `${fmtMs(ms)} ms`),
        atMost('drain lag p99 under ingest, every mark', lagSummary.p99, 1_000, (ms) => `${fmtMs(ms)} ms`),
        atMost('Redis bytes per registered pair, 10% active (vs ~300 B without the tier)', afterBytes, 60, (n) => `${n.toFixed(0)} B`),
      );
      report.data = {
        ingest: {
          on,
          off,
          cpu: ingestCpu,
          cpuRatio,
          lag: lagSummary,
          recordLag: recordLagSummary,
          changeLag: changeLagSummary,
          steadyLag: steadyLagSummary,
          steadyRate,
          unwritten,
        },
        persist: { rounds: persistRounds, drain, raw, persistRate, rawRate, rawInsert },
        rosters: { conversations: rosterConvs, seconds: rosterSeconds },
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

interface Cost {
  rows: number;
  seconds: number;
  nodeMicros: number;
  redisMicros: number;
  postgresMicros: number;
}

function emptyCost(): Cost {
  return { rows: 0, seconds: 0, nodeMicros: 0, redisMicros: 0, postgresMicros: 0 };
}

/** Runs `work` (writing `rows`), adding its wall time and each stage's CPU to `into`. */
async function measure(into: Cost, rows: number, redisInfo: Redis, postgresPid: number, work: () => Promise<void>): Promise<void> {
  const [redis0, pg0, node0] = [await redisStats(redisInfo), cpuMicros(postgresPid), process.cpuUsage()];
  const started = performance.now();
  await work();
  const seconds = (performance.now() - started) / 1000;
  const node = process.cpuUsage(node0);
  const [redis1, pg1] = [await redisStats(redisInfo), cpuMicros(postgresPid)];
  into.rows += rows;
  into.seconds += seconds;
  into.nodeMicros += node.user + node.system;
  into.redisMicros += statsDelta(redis0, redis1).cpuSeconds * 1e6;
  into.postgresMicros += pg1 - pg0;
}

/**
 * The drainer's own upsert statement over the same rows it wrote, in its chunks and with as
 * many chunks in flight: PostgreSQL's side of the drain alone, without the Redis reads and clears.
 */
async function rawUpsert(pgStore: PgStore, snapshots: readonly PersistedRecord[]): Promise<void> {
  const { recordsPerChunk, chunksInFlight } = DRAIN_PIPELINE;
  const chunks: PersistedRecord[][] = [];
  for (let i = 0; i < snapshots.length; i += recordsPerChunk) chunks.push(snapshots.slice(i, i + recordsPerChunk));
  let next = 0;
  await Promise.all(
    Array.from({ length: chunksInFlight }, async () => {
      while (next < chunks.length) await pgStore.writeRecords(chunks[next++] ?? []);
    }),
  );
}

/** Rows per second of the same statement inserting rows new to the table, from one client in batches of 2,000 (for reference). */
async function rawInsertRate(pgStore: PgStore, rows: number): Promise<number> {
  const n = Math.max(1, rows);
  const started = performance.now();
  for (let i = 0; i < n; i += 2_000) {
    const count = Math.min(2_000, n - i);
    const batch = Array.from({ length: count }, (_, k) => ({ uid: `raw${i + k}`, conv: `rawc${i + k}`, w: Date.now(), text: '1000|5|3|-1|1|1||' }));
    await pgStore.writeRecords(batch);
  }
  return n / ((performance.now() - started) / 1000);
}
