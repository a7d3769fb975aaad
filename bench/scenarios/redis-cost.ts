import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { Persister } from '../../server/durable/persister.js';
import { PgStore } from '../../server/durable/pg-store.js';
import { migrate } from '../../server/durable/schema.js';
import type { Engine, RecordedMessage } from '../../server/engine/engine.js';
import { mergeOps } from '../../server/engine/merge-ops.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { Metrics } from '../../server/metrics/metrics.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { startPostgres } from '../../test/helpers/postgres-server.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { seedMessage } from '../baselines/seed-counters.js';
import { redisStats, statsConnection, statsDelta } from '../lib/redis-info.js';
import { atMost, emptyReport, fmt, type Section } from '../lib/section.js';
import { fmtRate } from '../lib/table.js';
import { defaultEngineOptions, type InProcessStore, openInProcessStore } from './engine-setup.js';

/** Issue 19's targets: Redis CPU per message vs the seed design's, one-to-one and per group member. */
const TARGET_DIRECT = 5;
const TARGET_GROUP = 4;
const IN_FLIGHT = 8;
const GROUP_SIZE = 30;

/** A conversation and its members; a message goes from one member to the others. */
export interface Conv {
  conv: string;
  members: string[];
  seq: number;
}

/** One system's way to send a message (resolved once the store has it) and what it did, summed. */
interface System {
  name: string;
  send(c: Conv, sender: string): Promise<void>;
  /** Around each window, inside what it measures: the durable tier's drainer runs, and what it has not drained at the end is drained then. */
  around?: { start(): void; finish(): Promise<void> };
  messages: number;
  deliveries: number;
  cpuSeconds: number;
  calls: number;
  commands: number;
  seconds: number;
}

/** Script and function calls in an INFO commandstats delta (EVAL*, FCALL*): round trips into Lua. */
const SCRIPT_COMMANDS = ['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro'];

/**
 * Redis CPU per message, Redpoint's store path against seed 000's counters (issue 19's
 * yardstick), on one private redis-server, at the same load shape: one message per round trip
 * from the sender's side, `IN_FLIGHT` in flight, closed loop; one-to-one conversations and
 * `GROUP_SIZE`-member groups (write diffusion). CPU is redis-server's own (INFO used_cpu_user +
 * used_cpu_sys), so the load generator's CPU does not count.
 */
export const redisCostSection: Section = {
  id: 'redis-cost',
  title: 'Redis CPU per message — Redpoint vs the seed design’s counters',
  inDefaultPlan: true,
  async run(ctx) {
    const seconds = ctx.options.quick ? 2 : 8;
    const rounds = ctx.options.quick ? 2 : 4;
    const report = emptyReport(this.id, this.title);
    const redis = await startRedisServer();
    const info = statsConnection(redis.url);
    const seedClient = statsConnection(redis.url);
    const postgres = await startPostgres();
    let store: InProcessStore | undefined;
    let durable: RedisEngine | undefined;
    let pg: PgStore | undefined;
    try {
      store = await openInProcessStore({ url: redis.url });
      // The same engine with the durable tier on (its own key prefix, and a private PostgreSQL).
      pg = PgStore.connect(await postgres.createDatabase('cost'));
      await migrate(pg.pool);
      const options = defaultEngineOptions();
      durable = await createRedisEngine({ url: redis.url, prefix: 'dur', ...options, durable: { backing: pg, activityEveryMs: 60_000 } });
      const durableStore = durable.durableStore();
      await durableStore.markIntact(true);
      const durableSync = new SyncService(durable, { largeGroupThreshold: options.largeGroupThreshold });
      const persister = new Persister(
        durableStore,
        pg,
        { intervalMs: 200, batch: 2_000, backlogWarn: 1e12 },
        pino({ level: 'silent' }),
        new Metrics({ processMetrics: false }),
      );
      const results: Array<{ shape: string; size: number; redpoint: System; withTier: System; merged: System; seed: System }> = [];
      for (const [shape, size, count] of [
        ['one-to-one', 2, 2000],
        [`${GROUP_SIZE}-member group`, GROUP_SIZE, 200],
      ] as const) {
        const convs = await makeConvs(store.sync, shape === 'one-to-one' ? 'd' : 'g', size, count);
        await makeConvs(durableSync, shape === 'one-to-one' ? 'd' : 'g', size, count);
        await persister.drainAll(Date.now() + 300_000);
        const sync = store.sync;
        const engine = store.engine;
        const redpoint = system('redpoint, 1 message per flush', (c, sender) => flushOne(engine, c, sender));
        const merged = system('redpoint, group commit', (c, sender) => sync.postMessages([{ conv: c.conv, seq: c.seq, sender }]));
        const seed = system('seed 000 counters', (c, sender) =>
          seedMessage(
            seedClient,
            c.conv,
            c.members.filter((m) => m !== sender),
          ),
        );
        const durableEngine = durable;
        const withTier = system('redpoint + durable tier, 1 message per flush', (c, sender) => flushOne(durableEngine, c, sender), {
          start: () => persister.start(),
          finish: async () => {
            await persister.stop();
            await persister.drainAll(Date.now() + 300_000);
          },
        });
        const systems = [redpoint, withTier, merged, seed];
        for (const s of systems) await window(s, convs, 0.5, info, false);
        for (let r = 0; r < rounds; r++) for (const s of r % 2 === 0 ? systems : [...systems].reverse()) await window(s, convs, seconds / rounds, info, true);
        results.push({ shape, size, redpoint, withTier, merged, seed });
        ctx.log(`  redis-cost: ${shape} ${fmt.ratio(perMessage(redpoint) / perMessage(seed))}`);
      }
      report.method.push(
        `One private redis-server (default config). Redpoint, over a RedisEngine with default settings: \`1 message per flush\` runs an ingest flush of one message at a time (\`recordMessages\`, \`mergeOps\`, \`applyUserOps\`, as \`Ingest\` does: conversation step, user steps, stream, totals, notification), ${IN_FLIGHT} in flight, closed loop: the seed's load shape, and the targets' yardstick; \`group commit\` sends the same through \`SyncService.postMessages\`, whose ingest merges what arrives together (what a server does under this load). \`redpoint + durable tier\` is the same flush on an engine with the durable tier on (its own key prefix on the same redis-server, a private PostgreSQL): the user steps mark what they change and raise the write clock, and its drainer runs alongside in 200 ms passes, with what it had not drained at the end of each window drained inside the window, so its reads and clears of Redis count (its messages/s include that drain). Seed 000: per recipient \`HINCRBY unread:{uid} conv 1\`, \`INCR total_unread:{uid}\`, \`INCR sync_version:{uid}\`, \`PUBLISH\` on the user's channel, the message's commands pipelined in one round trip, ${IN_FLIGHT} in flight. The same conversations for both (2,000 one-to-one, 200 of ${GROUP_SIZE} members); each message goes to the next conversation, sent by alternate members.`,
        `Redis CPU: Δ(used_cpu_user + used_cpu_sys) of the redis-server over ${rounds} interleaved rounds of ${fmt.seconds(seconds / rounds)} per system; per message, and per delivered member (the ${GROUP_SIZE - 1} recipients of a group message; 1 for one-to-one). Script calls: EVAL*/FCALL* per message from INFO commandstats; commands: every command Redis counted (inside scripts too) per message.`,
      );
      report.tables.push({
        caption: 'Redis CPU per message',
        table: {
          header: ['shape', 'system', 'messages/s', 'Redis CPU/message', 'per delivered member', 'script calls/message', 'commands/message', 'vs seed'],
          rows: results.flatMap(({ shape, redpoint, withTier, merged, seed }) =>
            [redpoint, withTier, merged, seed].map((s) => [
              shape,
              s.name,
              fmtRate(s.messages / Math.max(1e-3, s.seconds)),
              fmt.us(perMessage(s)),
              fmt.us(perDelivery(s)),
              (s.calls / Math.max(1, s.messages)).toFixed(2),
              (s.commands / Math.max(1, s.messages)).toFixed(1),
              fmt.ratio(perMessage(s) / perMessage(seed)),
            ]),
          ),
        },
      });
      const [direct, group] = results;
      if (direct)
        report.verdicts.push(
          atMost('Redis CPU per one-to-one message vs seed 000', perMessage(direct.redpoint) / perMessage(direct.seed), TARGET_DIRECT, fmt.ratio),
          atMost(
            'Redis CPU per one-to-one message vs seed 000, durable tier on',
            perMessage(direct.withTier) / perMessage(direct.seed),
            TARGET_DIRECT,
            fmt.ratio,
          ),
        );
      if (group)
        report.verdicts.push(
          atMost(
            `Redis CPU per delivered member of a ${GROUP_SIZE}-member group vs seed 000`,
            perDelivery(group.redpoint) / perDelivery(group.seed),
            TARGET_GROUP,
            fmt.ratio,
          ),
          atMost(
            `Redis CPU per delivered member of a ${GROUP_SIZE}-member group vs seed 000, durable tier on`,
            perDelivery(group.withTier) / perDelivery(group.seed),
            TARGET_GROUP,
            fmt.ratio,
          ),
        );
      report.data = { seconds, rounds, results };
      return report;
    } finally {
      info.disconnect();
      seedClient.disconnect();
      await store?.close();
      await durable?.close();
      await pg?.close();
      await Promise.all([redis.stop(), postgres.stop()]);
    }
  },
};

/** What `Ingest` does for a flush of one message (server/sync/ingest.ts), without merging it with others. */
export async function flushOne(engine: Engine, c: Conv, sender: string, extra?: { counts?: boolean; recalls?: number[]; at?: number }): Promise<void> {
  // `extra` (issue 43): message-instructions' windows of a recall's notice, and of stamped messages.
  const message = { conv: c.conv, seq: c.seq, sender, ...extra };
  const item = { conv: c.conv, seq: c.seq, candidates: [sender], ...(extra?.at !== undefined ? { at: extra.at } : {}) };
  if (engine.recordAndApply) {
    const { recorded } = await engine.recordAndApply([item], [message], Date.now());
    if (!recorded[0]) throw new Error(`redis-cost: conversation ${c.conv} unknown`);
    return;
  }
  const [recorded] = await engine.recordMessages([item], Date.now());
  if (!recorded) throw new Error(`redis-cost: conversation ${c.conv} unknown`);
  const ops = mergeOps([message], new Map<string, RecordedMessage>([[c.conv, recorded]]));
  await engine.applyUserOps(ops, { at: Date.now(), results: false });
}

function system(name: string, send: System['send'], around?: System['around']): System {
  return { name, send, ...(around ? { around } : {}), messages: 0, deliveries: 0, cpuSeconds: 0, calls: 0, commands: 0, seconds: 0 };
}

const perMessage = (s: System): number => (s.cpuSeconds * 1e6) / Math.max(1, s.messages);
const perDelivery = (s: System): number => (s.cpuSeconds * 1e6) / Math.max(1, s.deliveries);

/** `suffix` (issue 43): e.g. '#r:1', conversations that are threads' children (message-instructions' thread replies). */
export async function makeConvs(sync: SyncService, tag: string, size: number, count: number, suffix = ''): Promise<Conv[]> {
  const convs: Conv[] = [];
  for (let i = 0; i < count; i++) {
    const members = Array.from({ length: size }, (_, k) => `${tag}u${(i * (size - 1) + k) % (count * (size - 1))}`);
    convs.push({ conv: `${tag}c${i}${suffix}`, members, seq: 0 });
  }
  for (let i = 0; i < convs.length; i += 64) await Promise.all(convs.slice(i, i + 64).map((c) => sync.changeMembers(c.conv, { add: c.members, remove: [] })));
  return convs;
}

/** `IN_FLIGHT` senders for `seconds`, each sending the next conversation's next message once the last is answered. */
async function window(s: System, convs: Conv[], seconds: number, info: Redis, measure: boolean): Promise<void> {
  const before = await redisStats(info);
  const started = performance.now();
  s.around?.start();
  const end = started + seconds * 1000;
  let next = 0;
  let messages = 0;
  let deliveries = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        const c = convs[next++ % convs.length] as Conv;
        c.seq += 1;
        await s.send(c, c.members[c.seq % c.members.length] as string);
        messages += 1;
        deliveries += c.members.length - 1;
      }
    }),
  );
  await s.around?.finish();
  const elapsed = (performance.now() - started) / 1000;
  const after = await redisStats(info);
  if (!measure) return;
  const d = statsDelta(before, after);
  s.messages += messages;
  s.deliveries += deliveries;
  s.seconds += elapsed;
  s.cpuSeconds += d.cpuSeconds;
  for (const name of SCRIPT_COMMANDS) s.calls += d.command(name).calls;
  // INFO itself is a command of the window; everything else was the system's.
  for (const [name] of after.commands) if (name !== 'info') s.commands += d.command(name).calls;
}
