import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UnreadSummary } from '../../protocol/types.js';
import { type NatsServer, startNats } from '../helpers/nats-server.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { mulberry32 } from '../helpers/prng.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY } from '../helpers/test-server.js';
import { eventually, NatsWriter, OutboxWriter } from './queue-helpers.js';

/**
 * The model test of queue ingest: two real server processes on one Redis (AOF always) consume a
 * random history through the outbox, through JetStream, or through both at once, with duplicates,
 * records out of order (messages before their conversation's membership), poison records in the
 * middle, one process killed with -9 while it works and started again, and Redis down for a
 * while. Afterwards every user's counts equal the model's, nothing waits in either queue, and the
 * dead letters are exactly the poison records.
 */
type Mode = 'outbox' | 'jetstream' | 'both';

interface Model {
  records: object[];
  poison: unknown[];
  members: Map<string, string[]>;
  /** Per user: expected unread and mentions per conversation. */
  expected: Map<string, Map<string, { unread: number; mentions: number }>>;
}

function buildModel(seed: number, tag: string): Model {
  const random = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const members = new Map<string, string[]>();
  const records: object[] = [];
  const users = Array.from({ length: 12 }, (_, i) => `${tag}u${i}`);
  const convs = Array.from({ length: 16 }, (_, i) => `${tag}c${i}`);
  for (const conv of convs) {
    const set = new Set<string>();
    while (set.size < 2 + Math.floor(random() * 3)) set.add(pick(users));
    members.set(conv, [...set]);
    records.push({ type: 'members', conv, add: [...set] });
  }
  const head = new Map<string, number>();
  const readSeq = new Map<string, number>();
  const mentioned = new Map<string, number[]>();
  const key = (uid: string, conv: string): string => `${uid} ${conv}`;
  for (let i = 0; i < 500; i++) {
    const conv = pick(convs);
    const list = members.get(conv) ?? [];
    if (random() < 0.8) {
      const seq = (head.get(conv) ?? 0) + 1;
      head.set(conv, seq);
      // Mostly one sender per conversation, so that the others' reads decide their counts.
      const sender = random() < 0.7 ? (list[0] as string) : pick(list);
      const mention = random() < 0.2 ? pick(list.filter((u) => u !== sender)) : undefined;
      records.push({ type: 'message', conv, seq, sender, ...(mention ? { mentions: [mention] } : {}) });
      readSeq.set(key(sender, conv), Math.max(readSeq.get(key(sender, conv)) ?? 0, seq));
      if (mention) mentioned.set(key(mention, conv), [...(mentioned.get(key(mention, conv)) ?? []), seq]);
    } else {
      const uid = pick(list);
      const top = head.get(conv) ?? 0;
      const seq = random() < 0.5 ? top : Math.floor(random() * (top + 1));
      records.push({ type: 'read', uid, conv, seq });
      readSeq.set(key(uid, conv), Math.max(readSeq.get(key(uid, conv)) ?? 0, seq));
    }
  }
  const expected = new Map<string, Map<string, { unread: number; mentions: number }>>();
  for (const [conv, list] of members) {
    for (const uid of list) {
      const top = head.get(conv) ?? 0;
      const read = readSeq.get(key(uid, conv)) ?? 0;
      const mentions = (mentioned.get(key(uid, conv)) ?? []).filter((s) => s > read).length;
      let mine = expected.get(uid);
      if (!mine) expected.set(uid, (mine = new Map()));
      mine.set(conv, { unread: Math.max(0, top - read), mentions });
    }
  }
  // Duplicates: a fifth of the records again, anywhere.
  const dups = records.filter(() => random() < 0.2);
  records.push(...dups);
  // Reorder: a windowed shuffle, so messages and reads may come before their membership.
  for (let i = records.length - 1; i > 0; i--) {
    const j = Math.max(0, i - Math.floor(random() * 40));
    [records[i], records[j]] = [records[j] as object, records[i] as object];
  }
  const poison: unknown[] = [
    { type: 'message', conv: convs[0], seq: -1, sender: 'x' },
    { type: 'nonsense' },
    { type: 'read', uid: users[0], conv: convs[0] },
    [1, 2, 3],
  ];
  return { records, poison, members, expected };
}

function canonical(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([x], [y]) => (x < y ? -1 : 1))) : v,
  );
}

async function unread(server: ServerProcess, uid: string): Promise<UnreadSummary> {
  const res = await fetch(`${server.url}/v1/users/${uid}/unread`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } });
  if (res.status !== 200) throw new Error(`unread ${uid}: ${res.status}`);
  return (await res.json()) as UnreadSummary;
}

async function metric(server: ServerProcess, pattern: RegExp): Promise<number> {
  const res = await fetch(`${server.url}/metrics`).catch(() => undefined);
  if (res?.status !== 200) return 0;
  const text = await res.text();
  let n = 0;
  for (const line of text.split('\n')) {
    if (!pattern.test(line)) continue;
    n += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return n;
}

describe('queue ingest against the model, two processes, kill -9 and Redis down', () => {
  let postgres: PostgresServer;
  let nats: NatsServer;
  let redis: RedisServer;
  const servers: ServerProcess[] = [];
  const cleanup: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    [postgres, nats, redis] = await Promise.all([startPostgres(), startNats(), startRedisServer({ aof: 'always' })]);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop().catch(() => undefined)));
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
    await Promise.all([postgres?.stop(), nats?.stop(), redis?.stop()]);
  });

  const modes: Mode[] = ['outbox', 'jetstream', 'both'];
  modes.forEach((mode, index) => {
    it(`through ${mode === 'both' ? 'both sources at once' : `the ${mode}`}: every count equals the model`, async () => {
      const tag = `${mode[0]}${index}`;
      const seed = 1000 + index;
      const model = buildModel(seed, tag);
      const dbUrl = await postgres.createDatabase(`model_${mode}`);
      const stream = `MODEL_${mode.toUpperCase()}`;
      const subject = `model.${mode}`;
      const env: Record<string, string> = {
        REDIS_URL: redis.url,
        STORE_TIMEOUT_MS: '1000',
        INGEST_BATCH: '25',
        INGEST_RETRY_SECONDS: '120',
        ...(mode !== 'jetstream' ? { INGEST_OUTBOX_URL: dbUrl } : {}),
        ...(mode !== 'outbox' ? { INGEST_NATS_URL: nats.url, INGEST_NATS_STREAM: stream, INGEST_NATS_SUBJECT: subject } : {}),
      };
      const spawn = async (): Promise<ServerProcess> => {
        // Two servers and their sources starting while the machine runs other suites: give them time.
        const s = await spawnServer({ ...env, LOG_LEVEL: 'info' }, { listenTimeoutMs: 90_000 });
        servers.push(s);
        return s;
      };
      let [a, b] = [await spawn(), await spawn()];
      const outbox = mode !== 'jetstream' ? await OutboxWriter.open(dbUrl) : undefined;
      const js = mode !== 'outbox' ? await NatsWriter.open(nats.url) : undefined;
      cleanup.push(async () => {
        await outbox?.close();
        await js?.close();
      });
      const random = mulberry32(seed * 7);
      const send = async (records: readonly unknown[]): Promise<void> => {
        const toOutbox: unknown[] = [];
        const toNats: unknown[] = [];
        for (const r of records) {
          const viaOutbox = mode === 'outbox' || (mode === 'both' && random() < 0.5);
          (viaOutbox ? toOutbox : toNats).push(r);
        }
        for (let i = 0; i < toOutbox.length; i += 20) await outbox?.insert(toOutbox.slice(i, i + 20));
        for (const r of toNats) await js?.publish([typeof r === 'string' ? JSON.stringify(r) : r], subject);
      };
      const all: unknown[] = [...model.records];
      // The poison goes in the middle of the history.
      for (const [i, p] of model.poison.entries()) all.splice(Math.floor(((i + 1) * all.length) / (model.poison.length + 1)), 0, p);
      const third = Math.ceil(all.length / 3);
      const applied = async (): Promise<number> =>
        (await metric(a, /^redpoint_ingest_records_total\{.*outcome="applied"/)) + (await metric(b, /^redpoint_ingest_records_total\{.*outcome="applied"/));

      // First third, then kill -9 of a process while records are flowing to it.
      await send(all.slice(0, third));
      await eventually('some records applied', async () => ((await applied()) > 50 ? true : undefined), 60_000);
      // The victim is a process that has been applying records (with the outbox, the one that
      // has had the turn), killed while more keep arriving.
      const appliedBy = async (s: ServerProcess): Promise<number> => metric(s, /^redpoint_ingest_records_total\{.*outcome="applied"/);
      if ((await appliedBy(b)) > (await appliedBy(a))) [a, b] = [b, a];
      const killSend = send(all.slice(third, 2 * third));
      a.proc.kill('SIGKILL');
      await a.exited;
      await killSend;
      a = await spawn();

      // The store down while the last third arrives.
      await redis.kill();
      await send(all.slice(2 * third));
      await eventually(
        'a process held records for the store',
        async () =>
          (await metric(a, /^redpoint_ingest_retries_total\{.*cause="store"/)) + (await metric(b, /^redpoint_ingest_retries_total\{.*cause="store"/)) > 0
            ? true
            : undefined,
        60_000,
      );
      await redis.restart();

      // Nothing left undelivered.
      await eventually(
        'both queues drained',
        async () => {
          const rows = outbox ? (await outbox.count()) + (await outbox.count('redpoint_outbox_retry')) : 0;
          const pending = js ? await js.waiting(stream) : 0;
          return rows + pending === 0 ? true : undefined;
        },
        120_000,
      );
      const deadOutbox = outbox ? await outbox.dead() : [];
      const deadNats = js ? await js.dead(`${stream}_DEAD`) : [];
      // jsonb keeps its own key order: compare with sorted keys.
      const dead = [...deadOutbox.map((d) => canonical(d.payload)), ...deadNats.map((d) => canonical(JSON.parse(d.data)))].sort();
      expect(dead).toEqual(model.poison.map(canonical).sort());

      const wrong: string[] = [];
      for (const [uid, convs] of model.expected) {
        const summary = await unread(b, uid);
        for (const [conv, want] of convs) {
          const got = summary.conversations.find((c) => c.conv === conv);
          if (!got || got.unread !== want.unread || got.mentions !== want.mentions)
            wrong.push(`${uid}/${conv}: want ${JSON.stringify(want)}, got ${JSON.stringify(got && { unread: got.unread, mentions: got.mentions })}`);
        }
        const total = [...convs.values()].reduce((n, c) => n + c.unread, 0);
        if (summary.total !== total) wrong.push(`${uid}: total ${summary.total}, want ${total}`);
      }
      console.log(
        `queue model (${mode}): ${all.length} records (${model.poison.length} poison), applied by the last two processes ${await applied()}, dead ${dead.length}`,
      );
      expect(wrong).toEqual([]);
      await Promise.all([a.stop(), b.stop()]);
    }, 300_000);
  });
});
