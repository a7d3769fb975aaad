import { startRedisServer } from '../../test/helpers/redis-server.js';
import { statsConnection } from '../lib/redis-info.js';
import { atLeast, atMost, emptyReport, fmt, type Section } from '../lib/section.js';
import { fmtRate } from '../lib/table.js';
import { createMesh, directMesh, openInProcessStore } from './engine-setup.js';
import { type ApplyChunk, CHUNK, emptyTotals, IN_FLIGHT, OpSource, perOp, rawApply, redpointApply, type StoreTotals, storeWindow } from './store-load.js';

const TARGET_VS_RAW = 0.8;
const TARGET_REDIS_US_PER_OP = 10;

/**
 * The store's cost per user op, from one process: RedisEngine.applyUserOps of real 1:1 message
 * ops (members of real conversations) against a raw ioredis baseline doing the same data commands
 * per op in one minimal script (store-raw.lua), on one private redis-server, in interleaved
 * rounds. Redis CPU per op from INFO used_cpu_user+sys: robust on a loaded machine, unlike
 * latency.
 */
export const storeSection: Section = {
  id: 'store',
  title: 'Store cost per user op — applyUserOps vs raw ioredis',
  inDefaultPlan: true,
  async run(ctx) {
    const users = ctx.options.quick ? 4000 : 20_000;
    const seconds = ctx.options.quick ? 4 : 16;
    const rounds = ctx.options.quick ? 2 : 4;
    const report = emptyReport(this.id, this.title);
    const redis = await startRedisServer();
    const info = statsConnection(redis.url);
    const raw = statsConnection(redis.url);
    const store = await openInProcessStore({ url: redis.url });
    try {
      const mesh = directMesh('s', users, 4);
      await createMesh(store.sync, mesh);
      const systems: Array<{ name: string; apply: ApplyChunk; source: OpSource; totals: StoreTotals }> = [
        { name: 'redpoint applyUserOps', apply: redpointApply(store.engine), source: new OpSource(mesh), totals: emptyTotals() },
        { name: 'raw ioredis EVALSHA', apply: await rawApply(raw), source: new OpSource(mesh), totals: emptyTotals() },
      ];
      for (const s of systems) await storeWindow(s.apply, s.source, 1, [info]);
      for (let r = 0; r < rounds; r++) {
        for (const s of r % 2 === 0 ? systems : [...systems].reverse()) await storeWindow(s.apply, s.source, seconds / rounds, [info], s.totals);
      }
      const [rp, base] = systems.map((s) => perOp(s.totals));
      if (!rp || !base) throw new Error('store: no result');
      report.method.push(
        `${users.toLocaleString('en-US')} users, each a member of 4 one-to-one conversations (made through SyncService, so records and conversations are real). Each applyUserOps call gets ${CHUNK} message ops of ${CHUNK} distinct users (one user step each, as an ingest flush makes them; the engine decides how many users one script carries; no results wanted, as ingest asks), ${IN_FLIGHT} calls in flight, closed loop; every op raises the user's lastSeq (every other one as the sender: readSeq too), so every op is a visible change: record, totals, version, stream entry, snapshot every so often, notification.`,
        'The raw baseline does, per op, one EVALSHA of `bench/baselines/store-raw.lua`: HSET of the record, HINCRBY of the version in the meta hash, RPUSH of the stream entry, PUBLISH — the same data commands with nothing decided (no read of the old record, no max-merge, no totals, no snapshot or trim). Both on one private redis-server (default config), ioredis auto-pipelining, rounds interleaved.',
        "`Redis CPU/op`: Δ(used_cpu_user + used_cpu_sys) of the redis-server over the measured windows ÷ ops. `EVALSHA µs/op`: Δ cmdstat_evalsha usec (time inside the scripts, wall clock: a loaded machine inflates it) ÷ ops; the engine may carry many users' ops in one call, so calls per op and µs per call are shown too. `client CPU/op`: this Node process (building the commands, decoding the replies).",
      );
      report.tables.push({
        caption: `Per user op (${seconds} s per system in ${rounds} interleaved rounds)`,
        table: {
          header: ['system', 'ops/s', 'vs raw', 'Redis CPU/op', 'EVALSHA µs/op', 'EVALSHA calls/op', 'µs/call', 'client CPU/op'],
          rows: systems.map((s) => {
            const p = perOp(s.totals);
            return [
              s.name,
              fmtRate(p.opsPerSec),
              fmt.ratio(p.opsPerSec / base.opsPerSec),
              fmt.us(p.redisCpuUs),
              fmt.us(p.evalshaUsPerOp),
              p.callsPerOp < 0.1 ? p.callsPerOp.toPrecision(2) : p.callsPerOp.toFixed(2),
              fmt.us(p.evalshaUsPerCall),
              fmt.us(p.clientCpuUs),
            ];
          }),
        },
      });
      report.verdicts.push(atLeast('applyUserOps ops/s vs raw ioredis', rp.opsPerSec / base.opsPerSec, TARGET_VS_RAW, fmt.ratio));
      report.verdicts.push(atMost('Redis CPU per user op', rp.redisCpuUs, TARGET_REDIS_US_PER_OP, fmt.us));
      report.notes.push(
        `Redis CPU per op, Redpoint vs raw: ${fmt.ratio(rp.redisCpuUs / base.redisCpuUs)}; client CPU per op: ${fmt.ratio(rp.clientCpuUs / base.clientCpuUs)}. On 2 cores the load generator's own CPU (one Node process building and decoding every script) competes with redis-server: ops/s is the pair's saturation point, the CPU per op is the cleaner figure.`,
      );
      report.data = { users, seconds, rounds, systems: systems.map((s) => ({ name: s.name, totals: s.totals, perOp: perOp(s.totals) })) };
      return report;
    } finally {
      info.disconnect();
      raw.disconnect();
      await store.close();
      await redis.stop();
    }
  },
};
