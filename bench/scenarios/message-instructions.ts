import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { Persister } from '../../server/durable/persister.js';
import { PgStore } from '../../server/durable/pg-store.js';
import { migrate } from '../../server/durable/schema.js';
import { hookDirtyKey } from '../../server/engine/redis/keys.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { Metrics } from '../../server/metrics/metrics.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { startPostgres } from '../../test/helpers/postgres-server.js';
import { findOnPath, startRedisServer } from '../../test/helpers/redis-server.js';
import { seedMessage } from '../baselines/seed-counters.js';
import { PROFILE_CATEGORIES, type Profile, readProfile } from '../lib/callgrind-profile.js';
import { redisStats, statsConnection, statsDelta } from '../lib/redis-info.js';
import { emptyReport, fmt, type Section } from '../lib/section.js';
import { defaultEngineOptions } from './engine-setup.js';
import { type Conv, flushOne, makeConvs } from './redis-cost.js';
import { type Counts, dumpPath, readDump } from './store-instructions.js';

/** A thread's followers in the thread-reply row: the root's sender, a replier, one mentioned. */
const THREAD_FOLLOWERS = 3;
const run = promisify(execFile);

/** Under valgrind every Redis command is ~50× slower: the engines' timeouts must not fire. */
const TIMEOUT_UNDER_VALGRIND_MS = 600_000;
const IN_FLIGHT = 8;

/**
 * One shape of `redis-cost`'s workload: `count` conversations of `size` members, `perConv`
 * messages to each per window. With the default SNAPSHOT_EVERY (10) and one or two conversations
 * per user, 10 messages per conversation move every user by whole snapshot cycles: each takes its
 * snapshot exactly once per window, so windows of two code versions compare.
 */
interface Shape {
  name: string;
  tag: string;
  size: number;
  count: number;
  /** The durable tier's drain runs after this many messages (a pass's worth at the tier-on rate). */
  drainEvery: number;
}

interface Counted {
  system: string;
  messages: number;
  deliveries: number;
  counts: Counts;
  /** Where the instructions went by kind of work (only telling with a symbol build). */
  profile: Profile;
  commands: number;
}

/**
 * `redis-cost`'s messages counted in Redis instructions (callgrind), for A/B of the Lua: the
 * count does not depend on the machine's load, where Redis CPU per message moves ±30% between
 * runs. One message per flush, `IN_FLIGHT` in flight; Redpoint with the durable tier off, on
 * (its drain inside the window, every `drainEvery` messages), and seed 000's counters.
 */
export const messageInstructionsSection: Section = {
  id: 'message-instructions',
  title: 'Redis instructions per message (callgrind) — Redpoint one message per flush, tier off and on, vs seed 000',
  inDefaultPlan: false,
  async run(ctx) {
    const report = emptyReport(this.id, this.title);
    const missing = ['valgrind', 'callgrind_control', 'callgrind_annotate'].filter((t) => !findOnPath(t));
    if (missing.length > 0) {
      report.verdicts.push({
        what: 'Redis instructions per message',
        value: `not measured: ${missing.join(', ')} not on PATH`,
        target: 'a count',
        met: undefined,
      });
      return report;
    }
    const perConv = ctx.options.quick ? 10 : 20;
    const shapes: Shape[] = [
      { name: 'one-to-one', tag: 'd', size: 2, count: ctx.options.quick ? 400 : 800, drainEvery: 1200 },
      { name: '30-member group', tag: 'g', size: 30, count: 40, drainEvery: 160 },
    ];
    const dumps = process.env.BENCH_CALLGRIND_DIR ?? (await mkdtemp(join(tmpdir(), 'redpoint-callgrind-')));
    const binary = process.env.BENCH_REDIS_SERVER;
    const redis = await startRedisServer({
      ...(binary ? { binary } : {}),
      runUnder: ['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${dumps}/callgrind.out.%p`],
      startTimeoutMs: 120_000,
    });
    const postgres = await startPostgres();
    const stats = statsConnection(redis.url);
    const engines: RedisEngine[] = [];
    let pg: PgStore | undefined;
    try {
      const pid = redis.pid();
      if (pid === undefined) throw new Error('message-instructions: redis-server is not running');
      pg = PgStore.connect(await postgres.createDatabase('instructions'));
      await migrate(pg.pool);
      const options = { ...defaultEngineOptions(), storeTimeoutMs: TIMEOUT_UNDER_VALGRIND_MS };
      const plain = await createRedisEngine({ url: redis.url, prefix: 'rp', ...options });
      engines.push(plain);
      const durable = await createRedisEngine({ url: redis.url, prefix: 'dur', ...options, durable: { backing: pg, activityEveryMs: 60_000 } });
      engines.push(durable);
      // The badge hook on (its marks in the user step); its drain (claim, fold, release) runs in
      // the hook's own calls, not in a message's: here the marks are deleted every `drainEvery`
      // messages instead, so each message pays the mark's insert (a drained user), not only an NX
      // test on a mark already there.
      const hooked = await createRedisEngine({ url: redis.url, prefix: 'hk', ...options, badgeMarks: true });
      engines.push(hooked);
      const clearMarks = async (): Promise<void> => {
        await stats.del(hookDirtyKey('hk', ''));
      };
      await durable.durableStore().markIntact(true);
      const persister = new Persister(
        durable.durableStore(),
        pg,
        { intervalMs: 200, batch: 2_000, backlogWarn: 1e12 },
        pino({ level: 'silent' }),
        new Metrics({ processMetrics: false }),
      );
      const drainAll = () => persister.drainAll(Date.now() + TIMEOUT_UNDER_VALGRIND_MS);
      const control = (...args: string[]) => run('callgrind_control', [...args, String(pid)]);
      let dumpCount = 0;
      const counted = async (
        system: string,
        convs: Conv[],
        messages: number,
        send: (c: Conv, sender: string) => Promise<void>,
        drainEvery = 0,
        drain: () => Promise<void> = drainAll,
      ): Promise<Counted> => {
        const before = await redisStats(stats);
        await control('--zero');
        await control('--instr=on');
        const deliveries = await sendAll(convs, messages, send, drainEvery ? { every: drainEvery, drain } : undefined);
        await control('--instr=off');
        await control('--dump');
        const after = await redisStats(stats);
        const d = statsDelta(before, after);
        let commands = 0;
        for (const [name] of after.commands) if (name !== 'info') commands += d.command(name).calls;
        dumpCount += 1;
        const counts = await readDump(dumps, pid, dumpCount);
        return { system, messages, deliveries, counts, profile: await readProfile(dumpPath(dumps, pid, dumpCount)), commands };
      };
      const rows: Array<{ shape: string; results: Counted[] }> = [];
      for (const shape of shapes) {
        ctx.log(`  message-instructions: ${shape.name}`);
        const a = await makeConvs(new SyncService(plain, { largeGroupThreshold: 500 }), shape.tag, shape.size, shape.count);
        const b = await makeConvs(new SyncService(durable, { largeGroupThreshold: 500 }), shape.tag, shape.size, shape.count);
        const h = await makeConvs(new SyncService(hooked, { largeGroupThreshold: 500 }), shape.tag, shape.size, shape.count);
        // Issue 43: conversations of their own for stamped messages (`at`), whose records carry it.
        const t = await makeConvs(new SyncService(plain, { largeGroupThreshold: 500 }), `${shape.tag}t`, shape.size, shape.count);
        // Issue 43: threads' children (`<conv>#r:<root>`, whose members are the followers: 3 here),
        // one per conversation, replied to as a message service's thread replies are.
        const r = await makeConvs(new SyncService(plain, { largeGroupThreshold: 500 }), `${shape.tag}r`, THREAD_FOLLOWERS, shape.count, '#r:1');
        await drainAll();
        // Two messages per conversation first, so no window counts a user's first write.
        await sendAll(a, 2 * shape.count, (c, s) => flushOne(plain, c, s));
        await sendAll(b, 2 * shape.count, (c, s) => flushOne(durable, c, s), { every: shape.drainEvery, drain: drainAll });
        await sendAll(h, 2 * shape.count, (c, s) => flushOne(hooked, c, s), { every: shape.drainEvery, drain: clearMarks });
        await sendAll(t, 2 * shape.count, (c, s) => flushOne(plain, c, s, { at: Date.now() }));
        await sendAll(r, 2 * shape.count, (c, s) => flushOne(plain, c, s));
        const messages = perConv * shape.count;
        const results = [
          await counted('redpoint, 1 message per flush', a, messages, (c, s) => flushOne(plain, c, s)),
          await counted('redpoint + durable tier (drain inside)', b, messages, (c, s) => flushOne(durable, c, s), shape.drainEvery),
          await counted('redpoint + badge hook marks', h, messages, (c, s) => flushOne(hooked, c, s), shape.drainEvery, clearMarks),
          await counted('seed 000 counters', a, messages, (c, s) =>
            seedMessage(
              stats,
              c.conv,
              c.members.filter((m) => m !== s),
            ),
          ),
          // Issue 43: every message stamped with the message service's time, as a service that
          // orders the list by last activity sends them.
          await counted('redpoint, each message with `at`', t, messages, (c, s) => flushOne(plain, c, s, { at: Date.now() })),
          // Issue 43: a recall of the message before, in a notice that does not count (the two
          // steps: ingest_flush.lua does not take them). Last: its records keep the set after.
          await counted('redpoint, a recall (counts: false, recalls seq − 1)', a, messages, (c, s) =>
            flushOne(plain, c, s, { counts: false, recalls: [c.seq - 1] }),
          ),
          // The engine's part of a thread reply: its child's step for the followers (the follows'
          // membership steps are extra, once per new follower; sync/threads.ts).
          await counted(`redpoint, a thread reply (${THREAD_FOLLOWERS} followers)`, r, messages, (c, s) => flushOne(plain, c, s)),
        ];
        rows.push({ shape: shape.name, results });
      }
      report.method.push(
        `redis-server under \`valgrind --tool=callgrind\`, instrumented only while each system's messages run; \`redis-cost\`'s workload (1 message per flush: \`recordAndApply\`, ${IN_FLIGHT} in flight), ${perConv} messages to each conversation per window (${shapes.map((s) => `${fmt.int(s.count)} ${s.name} conversations`).join(', ')}), so every user moves by whole snapshot cycles and each window of two code versions holds the same snapshots. The durable tier's drain runs inside its window every ${shapes.map((s) => `${fmt.int(s.drainEvery)} (${s.name})`).join(' / ')} messages. \`in scripts\`, \`data commands\`, \`replies → Lua\` as in \`store-instructions\`. The seed's cost is mostly system calls, which callgrind does not count: compare Redpoint's rows between runs (a change of the Lua), not against the seed (its Redis CPU, \`redis-cost\`).`,
      );
      report.tables.push({
        caption: 'Redis instructions per message and per delivered member',
        table: {
          header: ['shape', 'system', 'instructions/message', 'per delivered member', 'in scripts', 'data commands', 'replies → Lua', 'commands/message'],
          rows: rows.flatMap(({ shape, results }) =>
            results.map((r) => [
              shape,
              r.system,
              fmt.int(r.counts.total / r.messages),
              fmt.int(r.counts.total / r.deliveries),
              fmt.int(r.counts.script / r.messages),
              fmt.int(r.counts.commands / r.messages),
              fmt.int(r.counts.replies / r.messages),
              (r.commands / r.messages).toFixed(1),
            ]),
          ),
        },
      });
      const profiled = rows.flatMap(({ shape, results }) => results.filter((r) => r.profile.hasSymbols && r.counts.script > 0).map((r) => ({ shape, r })));
      if (profiled.length > 0) {
        report.tables.push({
          caption: "Where the instructions go (symbol build): each function's own instructions by kind of work, per delivered member",
          table: {
            header: ['kind of work', ...profiled.map(({ shape, r }) => `${shape}, ${r.system}`)],
            rows: PROFILE_CATEGORIES.map((category) => [
              category,
              ...profiled.map(({ r }) => {
                const n = r.profile.byCategory[category];
                return `${fmt.int(n / r.deliveries)} (${((100 * n) / r.profile.total).toFixed(1)}%)`;
              }),
            ]),
          },
        });
      } else {
        report.method.push(
          "Set `BENCH_REDIS_SERVER` to a redis-server built with symbols (`bench/tools/redis-with-symbols.sh` builds one) for a table of where the instructions go by kind of work (the Lua interpreter's bytecode, tables, strings, collector, redis.call, Redis commands, memory).",
        );
      }
      report.data = { perConv, shapes, rows };
      return report;
    } finally {
      stats.disconnect();
      for (const e of engines) await e.close();
      await pg?.close();
      await Promise.all([redis.stop(), postgres.stop()]);
      if (!process.env.BENCH_CALLGRIND_DIR) await rm(dumps, { recursive: true, force: true });
    }
  },
};

/** `messages` messages, each to the next conversation from its next member, `IN_FLIGHT` at a time; returns the deliveries. */
async function sendAll(
  convs: Conv[],
  messages: number,
  send: (c: Conv, sender: string) => Promise<void>,
  drain?: { every: number; drain: () => Promise<unknown> },
): Promise<number> {
  let next = 0;
  let deliveries = 0;
  for (let sent = 0; sent < messages; sent += IN_FLIGHT) {
    await Promise.all(
      Array.from({ length: Math.min(IN_FLIGHT, messages - sent) }, () => {
        const c = convs[next++ % convs.length] as Conv;
        c.seq += 1;
        deliveries += c.members.length - 1;
        return send(c, c.members[c.seq % c.members.length] as string);
      }),
    );
    if (drain && (sent + IN_FLIGHT) % drain.every === 0) await drain.drain();
  }
  if (drain) await drain.drain();
  return deliveries;
}
