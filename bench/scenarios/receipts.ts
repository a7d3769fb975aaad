import type { Redis } from 'ioredis';
import type { Engine } from '../../server/engine/engine.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { redisStats, statsConnection, statsDelta } from '../lib/redis-info.js';
import { emptyReport, fmt, type Section } from '../lib/section.js';
import { fmtRate } from '../lib/table.js';
import { defaultEngineOptions } from './engine-setup.js';
import { type Conv, makeConvs } from './redis-cost.js';

const IN_FLIGHT = 8;

/** One way to do a step (a read, or a message) and what Redis spent on it, summed over the measured windows. */
interface Runner {
  name: string;
  step(c: Conv, uid: string): Promise<void>;
  steps: number;
  cpuSeconds: number;
  commands: number;
  seconds: number;
}

/**
 * Read receipts' Redis cost (issue 44): per read of a member in conversations of 2, 30 and 500
 * members, without receipts (the user step alone, what a read cost before) and with them
 * (SyncService.read: the user step, then the setting read around the raise of the conversation's
 * register, and the coalesced announcement: at most one per conversation per second); and a
 * plain message with RECEIPTS_ON_SEND off (the default) and on.
 */
export const receiptsSection: Section = {
  id: 'receipts',
  title: 'Read receipts — Redis cost per read (2, 30, 500 members) and per message',
  inDefaultPlan: false,
  async run(ctx) {
    const seconds = ctx.options.quick ? 3 : 8;
    const rounds = ctx.options.quick ? 3 : 4;
    const report = emptyReport(this.id, this.title);
    const redis = await startRedisServer();
    const info = statsConnection(redis.url);
    const engines: RedisEngine[] = [];
    try {
      const options = defaultEngineOptions();
      const open = async (prefix: string): Promise<Engine> => {
        const e = await createRedisEngine({ url: redis.url, prefix, ...options });
        engines.push(e);
        return e;
      };
      const engine = await open('rc');
      const withReceipts = new SyncService(engine, { largeGroupThreshold: options.largeGroupThreshold });
      const onSend = new SyncService(engine, { largeGroupThreshold: options.largeGroupThreshold, receiptsOnSend: true });
      const readRows: Array<{ shape: string; size: number; plain: Runner; receipts: Runner }> = [];
      for (const [size, count] of [
        [2, 1000],
        [30, 100],
        [500, 8],
      ] as const) {
        const convs = await makeConvs(withReceipts, `r${size}`, size, count);
        // Messages to read: each conversation's head far enough ahead that every read raises.
        for (const c of convs) c.seq = 0;
        let head = 0;
        const heads = async (n: number): Promise<void> => {
          head += n;
          for (let i = 0; i < convs.length; i += 64)
            await Promise.all(convs.slice(i, i + 64).map((c) => withReceipts.postMessages([{ conv: c.conv, seq: head, sender: c.members[0] as string }])));
        };
        await heads(100_000);
        const readSeq = new Map<string, number>();
        const next = (c: Conv, uid: string): number => {
          const key = `${c.conv}|${uid}`;
          const seq = (readSeq.get(key) ?? 0) + 1;
          readSeq.set(key, seq);
          return seq;
        };
        const plain = runner('read, no receipts (the user step)', async (c, uid) => {
          await engine.applyUserOps([{ type: 'read', uid, conv: c.conv, seq: next(c, uid) }]);
        });
        const receipts = runner('read with receipts (SyncService.read)', async (c, uid) => {
          await withReceipts.read(uid, c.conv, next(c, uid));
        });
        for (const r of [plain, receipts]) await window(r, convs, 0.5, info, false);
        for (let round = 0; round < rounds; round++)
          for (const r of round % 2 === 0 ? [plain, receipts] : [receipts, plain]) await window(r, convs, seconds / rounds, info, true);
        readRows.push({ shape: `${size} members${size > options.largeGroupThreshold ? ' (read-diffused)' : ''}`, size, plain, receipts });
        ctx.log(`  receipts: ${size} members ${fmt.us(perStep(receipts))} vs ${fmt.us(perStep(plain))} per read`);
      }

      // A plain message, one-to-one, through SyncService (group commit), receipts' sender raise off and on.
      const direct = await makeConvs(withReceipts, 'm', 2, 1000);
      const message = (sync: SyncService) => async (c: Conv, sender: string) => {
        c.seq += 1;
        await sync.postMessages([{ conv: c.conv, seq: c.seq, sender }]);
      };
      const off = runner('message, RECEIPTS_ON_SEND off (default)', message(withReceipts));
      const on = runner('message, RECEIPTS_ON_SEND on', message(onSend));
      for (const r of [off, on]) await window(r, direct, 0.5, info, false);
      for (let round = 0; round < rounds; round++)
        for (const r of round % 2 === 0 ? [off, on] : [on, off]) await window(r, direct, seconds / rounds, info, true);

      // GET /unread and a pull from scratch of a user in 100 one-to-one conversations: sharing on
      // (every conversation's peer position read) vs off (the setting read, nothing else: what
      // the summary cost before receipts, plus one GET).
      const reader = 'uq-reader';
      const partners = Array.from({ length: 100 }, (_, i) => `uq-p${i}`);
      for (let i = 0; i < partners.length; i += 25)
        await Promise.all(partners.slice(i, i + 25).map((p, k) => withReceipts.changeMembers(`uq-c${i + k}`, { add: [reader, p], remove: [] })));
      await Promise.all(partners.map((p, k) => withReceipts.read(p, `uq-c${k}`, 0)));
      const readerConvs: Conv[] = [{ conv: 'uq', members: [reader], seq: 0 }];
      const summaryOn = runner('GET /unread, shares reads (100 peer positions read)', async () => {
        await withReceipts.unread(reader);
      });
      const summaryOff = runner('GET /unread, does not share (setting read only)', async () => {
        await withReceipts.unread('uq-private');
      });
      const pullOn = runner('pull from scratch, shares reads', async () => {
        await withReceipts.pull(reader, null, 1000);
      });
      const pullOff = runner('pull from scratch, does not share', async () => {
        await withReceipts.pull('uq-private', null, 1000);
      });
      // A twin who does not share, in 100 one-to-one conversations with the same partners.
      for (let i = 0; i < partners.length; i += 25)
        await Promise.all(partners.slice(i, i + 25).map((p, k) => withReceipts.changeMembers(`uq-d${i + k}`, { add: ['uq-private', p], remove: [] })));
      await withReceipts.receipts.setSharing('uq-private', false);
      const summaryRows = [summaryOn, summaryOff, pullOn, pullOff];
      for (const r of summaryRows) await window(r, readerConvs, 0.5, info, false);
      for (let round = 0; round < rounds; round++)
        for (const r of round % 2 === 0 ? summaryRows : [...summaryRows].reverse()) await window(r, readerConvs, seconds / rounds / 2, info, true);

      report.method.push(
        `One private redis-server (default config), the Redis engine with default settings (LARGE_GROUP_THRESHOLD ${options.largeGroupThreshold}: the 500-member group is read-diffused). Conversations of 2 (1,000 of them), 30 (100) and 500 (8) members with a head far ahead; each step reads the next seq of the next conversation for one of its members in turn, ${IN_FLIGHT} in flight, closed loop, ${rounds} interleaved rounds of ${fmt.seconds(seconds / rounds)} per system. \`no receipts\`: the user step alone (\`applyUserOps\` of one read: what a read cost before). \`with receipts\`: \`SyncService.read\`: the same step, the user's shareReads read alongside it, the conversation's register raised (reads_raise.lua: membership check + ZADD GT), the setting read again, and the coalesced announcement (at most one per conversation per RECEIPTS_PUSH_INTERVAL_MS, default 1 s: the member count, the roster, every member's setting and the positions, one PUBLISH per sharing member; none for a conversation above RECEIPTS_DETAIL_MEMBERS, 30).`,
        `Messages: 1,000 one-to-one conversations, \`SyncService.postMessages\` of one message, with the default RECEIPTS_ON_SEND=false and with it on (the sender's raise: GET setting, FCALL, GET setting). Redis CPU: Δ(used_cpu_user + used_cpu_sys); commands: every command Redis counted (inside scripts too).`,
      );
      report.tables.push({
        caption: 'Redis cost per read',
        table: {
          header: ['conversation', 'system', 'reads/s', 'Redis CPU/read', 'commands/read', 'vs no receipts'],
          rows: readRows.flatMap(({ shape, plain, receipts }) =>
            [plain, receipts].map((r) => [
              shape,
              r.name,
              fmtRate(r.steps / Math.max(1e-3, r.seconds)),
              fmt.us(perStep(r)),
              (r.commands / Math.max(1, r.steps)).toFixed(1),
              fmt.ratio(perStep(r) / perStep(plain)),
            ]),
          ),
        },
      });
      report.tables.push({
        caption: 'Redis cost of reading the badge and the stream, a user in 100 one-to-one conversations',
        table: {
          header: ['call', 'calls/s', 'Redis CPU/call', 'commands/call'],
          rows: summaryRows.map((r) => [
            r.name,
            fmtRate(r.steps / Math.max(1e-3, r.seconds)),
            fmt.us(perStep(r)),
            (r.commands / Math.max(1, r.steps)).toFixed(1),
          ]),
        },
      });
      report.tables.push({
        caption: 'Redis cost per plain one-to-one message',
        table: {
          header: ['system', 'messages/s', 'Redis CPU/message', 'commands/message', 'vs default'],
          rows: [off, on].map((r) => [
            r.name,
            fmtRate(r.steps / Math.max(1e-3, r.seconds)),
            fmt.us(perStep(r)),
            (r.commands / Math.max(1, r.steps)).toFixed(1),
            fmt.ratio(perStep(r) / perStep(off)),
          ]),
        },
      });
      report.notes.push(
        'The default message path is unchanged by construction: with RECEIPTS_ON_SEND off (the default) `postMessages` runs no receipts code, and test/http/command-count.test.ts pins a one-to-one message at one FCALL sent, as before. With it on, each message pays the sender raise (the row above).',
        'Per read, receipts add a constant: two GETs of the setting (the privacy check before and after the raise) and one FCALL (membership check + ZADD GT), whatever the group size; the announcement is at most one per conversation per interval (its roster, settings and PUBLISHes: one per sharing member, only in conversations of at most 30 members), so a 500-member group reading one message costs 500 raises, not 500 × 500 frames.',
        "Reads of receipts: `GET /unread` and a pull (snapshot: every conversation; delta: those with entries) add one GET (the asker's setting) and one reads_peers.lua call per 300 write-diffused conversations on one Redis (per conversation on a cluster), inside which an HGET of the member count per conversation and, for one-to-one ones, a ZRANGE of at most 3 entries: about 2.3 µs of Redis per one-to-one conversation, so a user in 100 of them pays ~5x the summary's Redis CPU (table above). A user who does not share pays one GET.",
      );
      report.data = {
        seconds,
        rounds,
        reads: readRows.map(({ shape, size, plain, receipts }) => ({ shape, size, plain: summary(plain), receipts: summary(receipts) })),
        messages: { off: summary(off), on: summary(on) },
        summaries: summaryRows.map((r) => ({ name: r.name, ...summary(r) })),
      };
      return report;
    } finally {
      info.disconnect();
      for (const e of engines) await e.close();
      await redis.stop();
    }
  },
};

function runner(name: string, step: Runner['step']): Runner {
  return { name, step, steps: 0, cpuSeconds: 0, commands: 0, seconds: 0 };
}

const perStep = (r: Runner): number => (r.cpuSeconds * 1e6) / Math.max(1, r.steps);

function summary(r: Runner): object {
  return {
    steps: r.steps,
    seconds: r.seconds,
    cpuSeconds: r.cpuSeconds,
    commands: r.commands,
    usPerStep: perStep(r),
    commandsPerStep: r.commands / Math.max(1, r.steps),
  };
}

/** `IN_FLIGHT` loops for `seconds`, each taking the next conversation and the next of its members. */
async function window(r: Runner, convs: Conv[], seconds: number, info: Redis, measure: boolean): Promise<void> {
  const before = await redisStats(info);
  const started = performance.now();
  const end = started + seconds * 1000;
  let next = 0;
  let steps = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        const i = next++;
        const c = convs[i % convs.length] as Conv;
        const member = c.members[Math.floor(i / convs.length) % c.members.length] as string;
        await r.step(c, member);
        steps += 1;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const after = await redisStats(info);
  if (!measure) return;
  const d = statsDelta(before, after);
  r.steps += steps;
  r.seconds += elapsed;
  r.cpuSeconds += d.cpuSeconds;
  for (const [name] of after.commands) if (name !== 'info') r.commands += d.command(name).calls;
}
