import type { Redis } from 'ioredis';
import type { Cursor } from '../../protocol/types.js';
import { snapshotInterval } from '../../server/engine/rules.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { seedMessage } from '../baselines/seed-counters.js';
import { eachLimited } from '../lib/http.js';
import { statsConnection } from '../lib/redis-info.js';
import { atMost, emptyReport, fmt, type Section } from '../lib/section.js';
import { renderBarChart } from '../lib/svg-chart.js';
import { type InProcessStore, openInProcessStore } from '../scenarios/engine-setup.js';
import { type Conv, flushOne, makeConvs } from '../scenarios/redis-cost.js';
import { HEADS_KEY, userKeys } from './keys.js';
import { measureWindow, median, min, type Window } from './measure.js';
import { SpikeStore } from './store.js';

/** Issue 42's bar for going on with the design. */
const WRITE_BAR = 2.5;
const READ_BAR = 1.5;
const IN_FLIGHT = 8;
const GROUP_SIZE = 30;
const READ_SIZES = [10, 100, 1000] as const;
const READERS_PER_SIZE = 4;
/** A pull continues from this many entries behind the user's version (a client that was away briefly). */
const PULL_BEHIND = 10;
/** Changes after the snapshot when `GET /unread` is read from it. */
const TAIL = 10;

interface Measured {
  name: string;
  windows: Window[];
}

/**
 * Issue 42's spike, measured side by side on one private redis-server in one run: seed 000's
 * counters, today's Redis engine (one message per flush, as redis-cost) and the spike's native
 * registers (bench/spike/store.ts) for messages; today's `GET /unread` and pull against the
 * spike's fold for users with 10, 100 and 1,000 conversations; Redis bytes per (user,
 * conversation). Every figure is taken in ≥ 3 interleaved rounds (ABAB…, the order reversed every
 * other round) and reported as min / median, with ratios taken within a round.
 */
export const engineSpikeSection: Section = {
  id: 'engine-spike',
  title: 'Engine spike (issue 42): native registers on write, one fold in TypeScript on read',
  inDefaultPlan: false,
  async run(ctx) {
    const quick = ctx.options.quick;
    const rounds = quick ? 3 : 5;
    const seconds = quick ? 1 : 2;
    const report = emptyReport(this.id, this.title);
    const redis = await startRedisServer();
    const info = statsConnection(redis.url);
    const client = statsConnection(redis.url);
    let today: InProcessStore | undefined;
    try {
      // The machine is shared and loaded: a slow reply is measured, not an error.
      today = await openInProcessStore({ url: redis.url }, 60_000);
      const spike = new SpikeStore(client);
      await spike.load();
      const interleaved = async (systems: Array<{ name: string; op: (i: number) => Promise<number> }>): Promise<Measured[]> => {
        const out = systems.map((s) => ({ name: s.name, windows: [] as Window[] }));
        for (const s of systems) await measureWindow(info, 0.3, IN_FLIGHT, s.op);
        for (let r = 0; r < rounds; r++) {
          const order = r % 2 === 0 ? systems.map((_, i) => i) : systems.map((_, i) => systems.length - 1 - i);
          for (const i of order) (out[i] as Measured).windows.push(await measureWindow(info, seconds, IN_FLIGHT, (systems[i] as (typeof systems)[number]).op));
        }
        return out;
      };

      // Writes.
      const writeRows: string[][] = [];
      const writeRatios: Array<{ shape: string; spike: number[]; pipelined: number[]; today: number[] }> = [];
      const chartGroups = [];
      for (const [shape, size, count] of [
        ['one-to-one', 2, 2000],
        [`${GROUP_SIZE}-member group`, GROUP_SIZE, 200],
      ] as const) {
        const tag = size === 2 ? 'd' : 'g';
        const convs = await makeConvs(today.sync, tag, size, count);
        await eachLimited(convs, 16, async (c) => {
          for (const uid of c.members) await spike.join(uid, c.conv, { gen: 1, joinGen: 1, joinHead: 0, head: 0, large: false, category: 'default' });
        });
        const engine = today.engine;
        const next = (i: number): { c: Conv; sender: string } => {
          const c = convs[i % convs.length] as Conv;
          c.seq += 1;
          return { c, sender: c.members[c.seq % c.members.length] as string };
        };
        const measured = await interleaved([
          {
            name: 'seed 000 counters',
            op: async (i) => {
              const { c, sender } = next(i);
              await seedMessage(
                client,
                c.conv,
                c.members.filter((m) => m !== sender),
              );
              return size - 1;
            },
          },
          {
            name: 'today: Redis engine, 1 message per flush',
            op: async (i) => {
              const { c, sender } = next(i);
              await flushOne(engine, c, sender);
              return size - 1;
            },
          },
          {
            name: 'spike: 1 function call per message (CH-gated appends)',
            op: async (i) => {
              const { c, sender } = next(i);
              await spike.message({ conv: c.conv, seq: c.seq, sender }, c.members);
              return size - 1;
            },
          },
          {
            name: 'spike: native pipeline, appends not gated',
            op: async (i) => {
              const { c, sender } = next(i);
              await nativePipeline(client, c, sender);
              return size - 1;
            },
          },
        ]);
        const [seed, current, gated, pipelined] = measured as [Measured, Measured, Measured, Measured];
        const perUnit = (w: Window): number => (w.redisCpuSeconds * 1e6) / Math.max(1, w.units);
        const perOp = (w: Window): number => (w.redisCpuSeconds * 1e6) / Math.max(1, w.ops);
        const nodePerOp = (w: Window): number => (w.nodeCpuSeconds * 1e6) / Math.max(1, w.ops);
        const vsSeed = (m: Measured): number[] => m.windows.map((w, r) => perUnit(w) / perUnit(seed.windows[r] as Window));
        writeRatios.push({ shape, spike: vsSeed(gated), pipelined: vsSeed(pipelined), today: vsSeed(current) });
        for (const m of measured) {
          const ratios = vsSeed(m);
          writeRows.push([
            shape,
            m.name,
            `${fmt.us(min(m.windows.map(perOp)))} / ${fmt.us(median(m.windows.map(perOp)))}`,
            `${fmt.us(min(m.windows.map(perUnit)))} / ${fmt.us(median(m.windows.map(perUnit)))}`,
            `${fmt.ratio(min(ratios))} / ${fmt.ratio(median(ratios))}`,
            `${fmt.us(min(m.windows.map(nodePerOp)))} / ${fmt.us(median(m.windows.map(nodePerOp)))}`,
            (
              sum(m.windows, (w) => w.commands) /
              Math.max(
                1,
                sum(m.windows, (w) => w.ops),
              )
            ).toFixed(1),
            (
              sum(m.windows, (w) => w.scriptCalls) /
              Math.max(
                1,
                sum(m.windows, (w) => w.ops),
              )
            ).toFixed(2),
            fmt.int(sum(m.windows, (w) => w.ops) / sum(m.windows, (w) => w.seconds)),
          ]);
        }
        chartGroups.push({
          title: `${shape}: Redis CPU per delivered member (median)`,
          rows: measured.map((m) => ({ label: m.name.split(':')[0] ?? m.name, values: [median(m.windows.map(perUnit))] })),
        });
        ctx.log(`  engine-spike: ${shape} spike ${fmt.ratio(median(vsSeed(gated)))} of seed, today ${fmt.ratio(median(vsSeed(current)))}`);
      }
      report.tables.push({
        caption: 'Writes: Redis CPU per message and per delivered member, Node CPU per message (min / median of the rounds)',
        table: {
          header: [
            'shape',
            'system',
            'Redis CPU/message',
            'per delivered member',
            'vs seed (per round)',
            'Node CPU/message',
            'commands/message',
            'function calls/message',
            'messages/s',
          ],
          rows: writeRows,
        },
      });

      // Reads and memory.
      const readRows: string[][] = [];
      const memoryRows: string[][] = [];
      const readRatios: Array<{ size: number; unread: number[]; snapshot: number[]; pull: number[]; compactionPerChange: number }> = [];
      for (const size of READ_SIZES) {
        const readers = Array.from({ length: READERS_PER_SIZE }, (_, i) => `r${size}u${i}`);
        await fillReaders(today, spike, readers, size);
        // Compaction has run, then TAIL more changes landed: the snapshot read replays them.
        for (const uid of readers) await spike.compact(uid);
        await addTail(today, spike, readers);
        const cursors = new Map<string, Cursor>();
        const spikeCursors = new Map<string, number>();
        for (const uid of readers) {
          const at = await today.sync.position(uid);
          cursors.set(uid, { epoch: at.epoch, version: Math.max(0, at.version - PULL_BEHIND) });
          spikeCursors.set(uid, Math.max(0, (await spike.unread(uid)).version - PULL_BEHIND));
        }
        const sync = today.sync;
        const reader = (i: number): string => readers[i % readers.length] as string;
        const measured = await interleaved([
          {
            name: 'today: GET /unread (SyncService.unread)',
            op: one(async (i) => {
              await sync.unread(reader(i));
            }),
          },
          {
            name: 'spike: GET /unread (fold)',
            op: one(async (i) => {
              await spike.unread(reader(i));
            }),
          },
          {
            name: `spike: GET /unread (snapshot + ${TAIL} changes)`,
            op: one(async (i) => {
              await spike.unreadFromSnapshot(reader(i));
            }),
          },
          {
            name: `today: pull ${PULL_BEHIND} behind`,
            op: one(async (i) => {
              await sync.pull(reader(i), cursors.get(reader(i)) as Cursor, 100);
            }),
          },
          {
            name: `spike: pull ${PULL_BEHIND} behind`,
            op: one(async (i) => {
              await spike.pull(reader(i), spikeCursors.get(reader(i)) as number, 100);
            }),
          },
        ]);
        const [tu, su, ss, tp, sp] = measured as [Measured, Measured, Measured, Measured, Measured];
        const perOp = (w: Window): number => (w.redisCpuSeconds * 1e6) / Math.max(1, w.ops);
        const nodePerOp = (w: Window): number => (w.nodeCpuSeconds * 1e6) / Math.max(1, w.ops);
        const vs = (a: Measured, b: Measured): number[] => a.windows.map((w, r) => perOp(w) / perOp(b.windows[r] as Window));
        readRatios.push({
          size,
          unread: vs(su, tu),
          snapshot: vs(ss, tu),
          pull: vs(sp, tp),
          compactionPerChange: median(su.windows.map(perOp)) / snapshotInterval(10, 10_000, size),
        });
        for (const [m, base] of [
          [tu, tu],
          [su, tu],
          [ss, tu],
          [tp, tp],
          [sp, tp],
        ] as const) {
          const ratios = vs(m, base);
          const nodeAdded = m.windows.map((w, r) => nodePerOp(w) - nodePerOp(base.windows[r] as Window));
          readRows.push([
            fmt.int(size),
            m.name,
            `${fmt.us(min(m.windows.map(perOp)))} / ${fmt.us(median(m.windows.map(perOp)))}`,
            `${fmt.ratio(min(ratios))} / ${fmt.ratio(median(ratios))}`,
            `${fmt.us(min(m.windows.map(nodePerOp)))} / ${fmt.us(median(m.windows.map(nodePerOp)))}`,
            m === base ? '—' : `${fmt.us(median(nodeAdded))}`,
            `${median(m.windows.map((w) => w.latency.summary().p50)).toFixed(2)} / ${median(m.windows.map((w) => w.latency.summary().p99)).toFixed(2)} ms`,
          ]);
        }
        const todayBytes = await Promise.all(readers.map((uid) => userBytes(info, `*{u:${uid}}*`)));
        const spikeBytes = await Promise.all(readers.map((uid) => userBytes(info, `${userKeys(uid).last.slice(0, -2)}:*`)));
        const spikeNoStream = await Promise.all(
          readers.map(async (uid) => (await userBytes(info, `${userKeys(uid).last.slice(0, -2)}:*`)) - (await keyBytes(info, userKeys(uid).stream))),
        );
        const encoding = String(await info.call('OBJECT', 'ENCODING', userKeys(readers[0] as string).last));
        memoryRows.push([
          fmt.int(size),
          fmt.bytes(median(todayBytes) / size),
          fmt.bytes(median(spikeBytes) / size),
          fmt.bytes(median(spikeNoStream) / size),
          fmt.ratio(median(spikeBytes) / median(todayBytes)),
          encoding,
        ]);
        ctx.log(
          `  engine-spike: ${size} conversations: unread ${fmt.ratio(median(vs(su, tu)))} of today (snapshot ${fmt.ratio(median(vs(ss, tu)))}), pull ${fmt.ratio(median(vs(sp, tp)))}`,
        );
      }
      report.tables.push({
        caption: 'Reads: Redis CPU and Node CPU per read, today vs the spike (min / median of the rounds)',
        table: {
          header: [
            'conversations',
            'system',
            'Redis CPU/read',
            'vs today (per round)',
            'Node CPU/read',
            'Node added vs today (median)',
            'latency p50 / p99 (median)',
          ],
          rows: readRows,
        },
      });
      report.tables.push({
        caption: 'Memory: Redis bytes per (user, conversation), the user’s own keys (MEMORY USAGE … SAMPLES 0), median of the readers',
        table: { header: ['conversations', 'today', 'spike', 'spike without its stream', 'spike vs today', 'spike lastSeq encoding'], rows: memoryRows },
      });

      for (const w of writeRatios) {
        report.verdicts.push(
          atMost(`spike: Redis CPU per delivered member, ${w.shape}, vs seed 000 (median of rounds)`, median(w.spike), WRITE_BAR, fmt.ratio),
        );
      }
      for (const r of readRatios) {
        report.verdicts.push(
          atMost(`spike: Redis CPU per GET /unread from every register, ${r.size} conversations, vs today (median)`, median(r.unread), READ_BAR, fmt.ratio),
          atMost(
            `spike: Redis CPU per GET /unread from the snapshot + ${TAIL} changes, ${r.size} conversations, vs today (median)`,
            median(r.snapshot),
            READ_BAR,
            fmt.ratio,
          ),
          atMost(`spike: Redis CPU per pull, ${r.size} conversations, vs today (median)`, median(r.pull), READ_BAR, fmt.ratio),
        );
      }
      report.notes.push(
        ...readRatios.map(
          (r) =>
            `${fmt.int(r.size)} conversations: compaction (a fold's register read + one SET) at today's snapshot interval (max(10, conversations) changes) adds ≈ ${fmt.us(r.compactionPerChange)} of Redis CPU per change of the user (estimated from the fold's read, not measured on its own).`,
        ),
      );
      report.method.push(
        `One private redis-server (default config), ${rounds} rounds of ${fmt.seconds(seconds)} per system, interleaved (the order reversed every other round), ${IN_FLIGHT} operations in flight, closed loop. Redis CPU: Δ(used_cpu_user + used_cpu_sys); Node CPU: this process's process.cpuUsage (load generator + ioredis + for the spike's reads the fold); ratios are taken within a round, then min / median over rounds.`,
        `Writes: the same conversations (2,000 one-to-one, 200 of ${GROUP_SIZE} members), each message to the next conversation, alternate senders. Seed 000: per recipient HINCRBY + 2 INCR + PUBLISH in one pipeline. Today: the Redis engine's ingest flush for one message (one FCALL: conversation step + user steps). Spike: one FCALL per message (bench/spike/functions.lua: ZADD heads GT, per member ZADD last GT CH, the sender's ZADD read GT CH, RPUSH + PUBLISH only when a register moved); and the same as a plain pipeline of native commands with every append made (bounds what the function's Lua costs).`,
        `Reads: ${READERS_PER_SIZE} users per size, each in N one-to-one conversations with 3 messages each (every tenth mentioning the user, half read up to 1), written to both stores. Today's GET /unread is SyncService.unread (engine.userState: stored totals + records), its pull SyncService.pull from ${PULL_BEHIND} entries behind; the spike's: one FCALL_RO reading the user's registers, folded with rules.ts and protocol/view.ts's summarize; its pull one FCALL_RO (the changed conversations' registers), folded the same way.`,
      );
      report.charts.push({
        name: 'writes',
        title: 'Redis CPU per delivered member',
        svg: renderBarChart({
          title: 'Redis CPU per delivered member: seed 000, today, the spike',
          subtitle: `one redis-server, ${IN_FLIGHT} in flight, median of ${rounds} interleaved rounds`,
          unit: 'µs',
          series: [{ name: 'Redis CPU per delivered member', color: '#3b7dd8' }],
          groups: chartGroups,
        }),
      });
      report.data = { rounds, seconds, writeRatios, readRatios, writeRows, readRows, memoryRows };
      return report;
    } finally {
      info.disconnect();
      client.disconnect();
      await today?.close();
      await redis.stop();
    }
  },
};

/** A read as an operation of one delivery. */
function one(read: (i: number) => Promise<void>): (i: number) => Promise<number> {
  return async (i) => {
    await read(i);
    return 1;
  };
}

function sum<T>(list: readonly T[], f: (t: T) => number): number {
  return list.reduce((a, t) => a + f(t), 0);
}

/** The spike's message as plain native commands in one pipeline: every member's append made. */
async function nativePipeline(client: Redis, c: Conv, sender: string): Promise<void> {
  const p = client.pipeline().zadd(HEADS_KEY, 'GT', c.seq, c.conv);
  for (const uid of c.members) {
    const k = userKeys(uid);
    p.zadd(k.last, 'GT', c.seq, c.conv);
    if (uid === sender) p.zadd(k.read, 'GT', c.seq, c.conv);
    p.rpush(k.stream, c.conv);
    p.publish(k.channel, c.conv);
  }
  const replies = await p.exec();
  for (const [err] of replies ?? []) if (err) throw err;
}

/** Each reader in `size` one-to-one conversations, three messages in each, in both stores. */
async function fillReaders(today: InProcessStore, spike: SpikeStore, readers: readonly string[], size: number): Promise<void> {
  const convs = readers.flatMap((uid) => Array.from({ length: size }, (_, j) => ({ uid, j, conv: `${uid}c${j}`, partner: `${uid}p${j}` })));
  await eachLimited(convs, 32, async ({ uid, j, conv, partner }) => {
    await today.sync.changeMembers(conv, { add: [uid, partner], remove: [] });
    const join = { gen: 1, joinGen: 1, joinHead: 0, head: 0, large: false, category: 'private' };
    await spike.join(uid, conv, join);
    await spike.join(partner, conv, join);
    for (let seq = 1; seq <= 3; seq++) {
      const m = { conv, seq, sender: partner, ...(seq === 2 && j % 10 === 0 ? { mentions: [uid] } : {}) };
      await today.sync.postMessages([m]);
      await spike.message(m, [uid, partner]);
    }
    if (j % 2 === 0) {
      await today.sync.read(uid, conv, 1);
      await spike.read(uid, conv, 1);
    }
  });
}

/** One more message to each reader in its first TAIL conversations, in both stores. */
async function addTail(today: InProcessStore, spike: SpikeStore, readers: readonly string[]): Promise<void> {
  for (const uid of readers) {
    for (let j = 0; j < TAIL; j++) {
      const m = { conv: `${uid}c${j}`, seq: 4, sender: `${uid}p${j}` };
      await today.sync.postMessages([m]);
      await spike.message(m, [uid, m.sender]);
    }
  }
}

async function keyBytes(r: Redis, key: string): Promise<number> {
  return Number((await r.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
}

/** The summed MEMORY USAGE of the keys matching `pattern`. */
async function userBytes(r: Redis, pattern: string): Promise<number> {
  let cursor = '0';
  let bytes = 0;
  do {
    const [nextCursor, keys] = (await r.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)) as [string, string[]];
    cursor = nextCursor;
    for (const key of keys) bytes += await keyBytes(r, key);
  } while (cursor !== '0');
  return bytes;
}
