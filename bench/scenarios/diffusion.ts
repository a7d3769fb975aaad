import type { Redis } from 'ioredis';
import type { Cursor } from '../../protocol/types.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { eachLimited } from '../lib/http.js';
import { redisStats, statsConnection, statsDelta } from '../lib/redis-info.js';
import { emptyReport, fmt, type Section } from '../lib/section.js';
import { defaultEngineOptions, directMesh } from './engine-setup.js';

const IN_FLIGHT = 8;
/** Group sizes measured: issue 19's mid-size range, up to today's default threshold. */
const SIZES = [10, 30, 100, 300, 500] as const;
/** 1:1 conversations per user besides its group: a user's records are not only the group's. */
const DIRECT_PER_USER = 4;
/**
 * Groups per size: twice the messages in flight, so group commit seldom merges two messages of one
 * group into one user op per member (which would make write diffusion look cheaper than a group
 * that is not that busy is).
 */
const GROUPS = 2 * IN_FLIGHT;
/**
 * Reads per delivered member-message, the read-heaviness the crossover is computed at. 2 is what
 * seed 004's 500k reads/s give against seed 000's peak deliveries (20,000 messages/s, 40% to
 * groups of ~30 → ~244,000 deliveries/s): an assumption from two seeds, printed with the others.
 */
const READ_RATIOS = [0.1, 0.5, 1, 2, 5, 10] as const;
const SEED_RATIO = 2;

type Mode = 'write' | 'read';

/** Redis CPU per unit of each workload, for one group size and one mode. */
interface Costs {
  mode: Mode;
  size: number;
  /** Per group message: the conversation step and, for write diffusion, every member's step. */
  message: number;
  /** Per `GET /unread` of a member (SyncService.unread: the user's state and the heads it needs). */
  unread: number;
  /** Per pull of a member that missed the last group message (SyncService.pull, heads included). */
  pull: number;
  /** This process's CPU per unit (the engine's client side and SyncService), same units. */
  node: { message: number; unread: number; pull: number };
  messagesPerSecond: number;
}

/**
 * Where write diffusion stops paying (issue 19, lever "diffusion by cost"): for groups of 10 to 500
 * members, Redis CPU per group message and per read (`GET /unread`, a pull) of a member, with the
 * group write-diffused (LARGE_GROUP_THRESHOLD above its size) and read-diffused (below it), on one
 * private redis-server. Per message, at R reads per delivered member: message + (members − 1) × R ×
 * the mean read; the crossover R is where the two modes cost the same.
 */
export const diffusionSection: Section = {
  id: 'diffusion',
  title: 'Write vs read diffusion by Redis CPU — group messages and the reads they cost',
  inDefaultPlan: true,
  async run(ctx) {
    const seconds = ctx.options.quick ? 1 : 3;
    const report = emptyReport(this.id, this.title);
    const redis = await startRedisServer();
    const info = statsConnection(redis.url);
    const options = defaultEngineOptions();
    const engines: Record<Mode, RedisEngine | undefined> = { write: undefined, read: undefined };
    try {
      engines.write = await createRedisEngine({ url: redis.url, prefix: 'dw', ...options });
      engines.read = await createRedisEngine({ url: redis.url, prefix: 'dr', ...options });
      const results: Array<{ size: number; write: Costs; read: Costs }> = [];
      for (const size of SIZES) {
        const write = await measure(engines.write, 'write', size, seconds, info);
        const read = await measure(engines.read, 'read', size, seconds, info);
        results.push({ size, write, read });
        ctx.log(`  diffusion: ${size} members, per message ${fmt.us(write.message)} written vs ${fmt.us(read.message)} read-diffused`);
      }
      report.method.push(
        `One private redis-server, two RedisEngines with default settings on their own key prefixes. Per group size, ${SIZES.join(', ')} members: ${GROUPS} groups of that size (each message to a random one: few are merged by group commit), their members all distinct users, each user in one group and ${DIRECT_PER_USER} one-to-one conversations. \`write\`: LARGE_GROUP_THRESHOLD above the size (each message writes every member's state, stream and totals); \`read\`: the threshold one below it (a message raises the conversation's head; each member's reads add it).`,
        `Three windows per size and mode, ${IN_FLIGHT} in flight, closed loop, ${fmt.seconds(seconds)} each: group messages through SyncService.postMessages (as the server ingests them); \`GET /unread\` of members (SyncService.unread: the user's state, plus the heads of its read-diffused groups); pulls of members from the cursor they had before the last group message (SyncService.pull with its heads; a read-diffused message moves no member's version, so their cursor is current). Redis CPU: Δ(used_cpu_user + used_cpu_sys) per unit; Node: this process's CPU per unit (the engine's client side, SyncService and the load loop; the WebSocket fan-out is not in it: \`head\` frames to each socket of a read-diffused group's members, or each member's own push).`,
        `Cost per group message at R reads per delivered member = message + (members − 1) × R × (unread + pull) / 2. Crossover R: where the two modes cost the same (read diffusion is cheaper above it when its reads cost more, below it when they cost less). R = ${SEED_RATIO} is seed 004's read-heavy ratio against seed 000's peak deliveries (an assumption).`,
      );
      report.tables.push({
        caption: 'Redis CPU per unit',
        table: {
          header: [
            'members',
            'mode',
            'messages/s',
            'per message',
            'per delivered member',
            'per GET /unread',
            'per pull',
            'Node: per message',
            'Node: per GET /unread',
            'Node: per pull',
          ],
          rows: results.flatMap(({ size, write, read }) =>
            [write, read].map((c) => [
              String(size),
              c.mode,
              fmt.int(c.messagesPerSecond),
              fmt.us(c.message),
              fmt.us(c.message / (size - 1)),
              fmt.us(c.unread),
              fmt.us(c.pull),
              fmt.us(c.node.message),
              fmt.us(c.node.unread),
              fmt.us(c.node.pull),
            ]),
          ),
        },
      });
      report.tables.push({
        caption:
          'Redis CPU per group message, reads included, at R reads per delivered member: read diffusion / write diffusion (below 1: read diffusion is cheaper)',
        table: {
          header: ['members', ...READ_RATIOS.map((r) => `R = ${r}`), 'crossover R'],
          rows: results.map(({ size, write, read }) => [
            String(size),
            ...READ_RATIOS.map((r) => fmt.ratio(perMessageWithReads(read, r) / perMessageWithReads(write, r))),
            crossoverText(write, read),
          ]),
        },
      });
      const cheaperAtSeed = results.filter(({ write, read }) => perMessageWithReads(read, SEED_RATIO) < perMessageWithReads(write, SEED_RATIO));
      const smallest = cheaperAtSeed[0]?.size;
      report.notes.push(
        smallest === undefined
          ? `At R = ${SEED_RATIO}, write diffusion cost Redis less at every measured size (up to ${SIZES[SIZES.length - 1]} members).`
          : `At R = ${SEED_RATIO}, read diffusion cost Redis less from ${smallest} members on (of the sizes measured; the default LARGE_GROUP_THRESHOLD is ${defaultEngineOptions().largeGroupThreshold}, and bench/reports/redis-cost.md says why it is not lower).`,
        'On one Redis the heads of a member’s read-diffused groups are read inside the same script as the state (pull.lua, user_state.lua), so a read costs the same in both modes; on a Redis Cluster each head is one more HGET per read, and the crossover R falls to what the reads then add.',
      );
      report.data = { seconds, readRatios: READ_RATIOS, seedRatio: SEED_RATIO, results };
      return report;
    } finally {
      info.disconnect();
      await engines.write?.close();
      await engines.read?.close();
      await redis.stop();
    }
  },
};

function perMessageWithReads(c: Costs, readsPerDelivery: number): number {
  return c.message + (c.size - 1) * readsPerDelivery * ((c.unread + c.pull) / 2);
}

/** The R at which both modes cost the same per message, in words. */
function crossoverText(write: Costs, read: Costs): string {
  const readExtra = (read.unread + read.pull) / 2 - (write.unread + write.pull) / 2;
  const writeSaving = write.message - read.message;
  if (readExtra <= 0) return writeSaving >= 0 ? 'none: read diffusion is cheaper at every R' : 'none: write diffusion is cheaper at every R';
  if (writeSaving <= 0) return 'none: write diffusion is cheaper at every R';
  return `${(writeSaving / ((write.size - 1) * readExtra)).toFixed(2)} (read diffusion cheaper below)`;
}

interface Group {
  conv: string;
  members: string[];
  seq: number;
}

async function measure(engine: RedisEngine, mode: Mode, size: number, seconds: number, info: Redis): Promise<Costs> {
  const sync = new SyncService(engine, { largeGroupThreshold: mode === 'write' ? 1_000_000 : size - 1 });
  const tag = `${mode[0]}${size}`;
  const users = GROUPS * size;
  const mesh = directMesh(tag, users, DIRECT_PER_USER);
  const groups: Group[] = [];
  for (let g = 0; g * size + size <= users; g++) {
    groups.push({ conv: `${tag}g${g}`, members: mesh.users.slice(g * size, g * size + size), seq: 0 });
  }
  await eachLimited(mesh.convs, 64, ({ conv, a, b }) => sync.changeMembers(conv, { add: [a, b], remove: [] }).then(() => undefined));
  await eachLimited(mesh.convs, 64, ({ conv, a }) => sync.postMessages([{ conv, seq: 1, sender: a }]));
  for (const g of groups) {
    await sync.changeMembers(g.conv, { add: g.members, remove: [] });
    const probe = (await engine.userState(g.members[0] as string)).states.find((c) => c.conv === g.conv);
    if (!probe || probe.large !== (mode === 'read')) throw new Error(`diffusion: ${g.conv} is not ${mode}-diffused`);
  }
  const send = async (): Promise<number> => {
    const g = groups[Math.floor(Math.random() * groups.length)] as Group;
    g.seq += 1;
    await sync.postMessages([{ conv: g.conv, seq: g.seq, sender: g.members[g.seq % size] as string }]);
    return 1;
  };
  // A warm-up, unmeasured; then the measured message window.
  await closedLoop(send, Math.min(0.5, seconds), info);
  const message = await closedLoop(send, seconds, info);
  const readers = groups.flatMap((g) => g.members);
  let next = 0;
  const unread = await closedLoop(
    async () => {
      await sync.unread(readers[next++ % readers.length] as string);
      return 1;
    },
    seconds,
    info,
  );
  // The cursor before the last group message: a write-diffused one moved every member's version by
  // one; a read-diffused one moved none (its head comes with the pull).
  const cursors = new Map<string, Cursor>();
  await eachLimited(readers, 64, async (uid) => {
    const at = await sync.position(uid);
    cursors.set(uid, mode === 'write' ? { epoch: at.epoch, version: Math.max(0, at.version - 1) } : at);
  });
  next = 0;
  const pull = await closedLoop(
    async () => {
      const uid = readers[next++ % readers.length] as string;
      await sync.pull(uid, cursors.get(uid) ?? null);
      return 1;
    },
    seconds,
    info,
  );
  return {
    mode,
    size,
    message: message.cpuPerUnit,
    unread: unread.cpuPerUnit,
    pull: pull.cpuPerUnit,
    node: { message: message.nodePerUnit, unread: unread.nodePerUnit, pull: pull.nodePerUnit },
    messagesPerSecond: message.rate,
  };
}

/** `IN_FLIGHT` loops of `step` for `seconds`; redis-server's CPU per unit done and the rate. */
async function closedLoop(step: () => Promise<number>, seconds: number, info: Redis): Promise<Measured> {
  const before = await redisStats(info);
  const nodeBefore = process.cpuUsage();
  const started = performance.now();
  const end = started + seconds * 1000;
  let units = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        // Not `units += await step()`: that reads `units` before the await, and the loops in
        // flight would overwrite each other's counts.
        const done = await step();
        units += done;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const node = process.cpuUsage(nodeBefore);
  const d = statsDelta(before, await redisStats(info));
  const per = Math.max(1, units);
  return { cpuPerUnit: (d.cpuSeconds * 1e6) / per, nodePerUnit: (node.user + node.system) / per, rate: units / elapsed };
}

interface Measured {
  /** redis-server's CPU per unit, µs. */
  cpuPerUnit: number;
  /** This process's CPU per unit, µs: the server's side of the work (and the loop's own, the same for both modes). */
  nodePerUnit: number;
  rate: number;
}
