import { connect, RetentionPolicy, StorageType } from 'nats';
import pg from 'pg';
import { outboxDdl } from '../../server/queue/outbox-sql.js';
import { type NatsServer, startNats } from '../../test/helpers/nats-server.js';
import { startPostgres } from '../../test/helpers/postgres-server.js';
import { startRedisServer } from '../../test/helpers/redis-server.js';
import { LatencyHistogram } from '../lib/histogram.js';
import { CpuWindow } from '../lib/proc.js';
import { labelledSum } from '../lib/prom.js';
import { emptyReport, fmt, type Section } from '../lib/section.js';
import { fmtMs, fmtRate } from '../lib/table.js';
import { type RunningSystem, SYSTEMS, startSystem } from '../systems.js';
import { IngestSession } from './ingest.js';
import { connectAll, createDirectConversations, directConv, senderId, userId } from './setup.js';

type Source = 'outbox' | 'jetstream';

interface Drain {
  source: Source | 'http';
  records: number;
  perSec: number;
  cores: number;
}

const TAG = 'qb';
const TABLE = 'redpoint_outbox';
const STREAM = 'REDPOINT_INGEST';
const SUBJECT = 'redpoint.ingest';

/**
 * Queue ingest: records consumed per second from the PostgreSQL outbox and from NATS JetStream,
 * against HTTP ingest (`POST /v1/messages`, one message per request) in the same run, each on the
 * same Redis; and the latency from the outbox insert (or the JetStream publish) to the WebSocket
 * push, p50/p99.
 */
export const queueIngestSection: Section = {
  id: 'queue-ingest',
  title: 'Queue ingest — outbox and JetStream consumed per second, insert-to-push latency',
  inDefaultPlan: true,
  async run(ctx) {
    const quick = ctx.options.quick;
    const convs = 1000;
    const backlog = quick ? 10_000 : 20_000;
    const seconds = quick ? 3 : 8;
    const clients = 200;
    const latencyRecords = quick ? 400 : 1000;
    const report = emptyReport(this.id, this.title);
    const [redis, postgres, nats] = await Promise.all([startRedisServer(), startPostgres(), startNats()]);
    const seqs = new Int32Array(convs);
    const next = (i: number): object => {
      seqs[i] = (seqs[i] ?? 0) + 1;
      return { type: 'message', conv: directConv(TAG, i), seq: seqs[i], sender: senderId(TAG, i) };
    };
    const drains: Drain[] = [];
    const latency = new Map<Source, LatencyHistogram>();
    try {
      const db = await postgres.createDatabase('bench');
      const env = (sources: Source[]): Record<string, string> => ({
        LOG_LEVEL: 'warn',
        ...(sources.includes('outbox') ? { INGEST_OUTBOX_URL: db } : {}),
        ...(sources.includes('jetstream') ? { INGEST_NATS_URL: nats.url } : {}),
      });
      // HTTP first, and the conversations every queue record names.
      const plain = await startSystem(SYSTEMS['redpoint-redis'], { redisUrl: redis.url, env: { LOG_LEVEL: 'warn' }, name: 'redpoint-redis (HTTP)' });
      try {
        await createDirectConversations(plain.http, TAG, convs);
        const http = await IngestSession.open(plain, convs, 32, 'qh');
        await http.run(1, 1, false);
        const cpu = new CpuWindow(plain.pid).start();
        await http.run(1, seconds, true);
        const used = cpu.stop();
        const perSec = http.result(1)?.messagesPerSec ?? Number.NaN;
        drains.push({ source: 'http', records: Math.round(perSec * used.seconds), perSec, cores: used.cores });
      } finally {
        await plain.stop();
      }
      for (const source of ['outbox', 'jetstream'] as const) {
        ctx.log(`  queue-ingest: ${backlog} records into the ${source} before the server starts`);
        const records = Array.from({ length: backlog }, (_, k) => next(k % convs));
        await (source === 'outbox' ? fillOutbox(db, records) : fillStream(nats, records));
        const system = await startSystem(SYSTEMS['redpoint-redis'], { redisUrl: redis.url, env: env([source]), name: `redpoint-redis (${source})` });
        try {
          drains.push(await measureDrain(system, source, backlog));
        } finally {
          await system.stop();
        }
      }
      // Latency: both sources on one server, clients connected, records paced one at a time.
      const system = await startSystem(SYSTEMS['redpoint-redis'], { redisUrl: redis.url, env: env(['outbox', 'jetstream']), name: 'redpoint-redis (both)' });
      const sentAt = new Map<string, { at: number; source: Source }>();
      const uids = Array.from({ length: clients }, (_, i) => userId(TAG, i));
      const sockets = await connectAll(system, uids, () => (conv, lastSeq) => {
        const key = `${conv} ${lastSeq}`;
        const sent = sentAt.get(key);
        if (!sent) return;
        sentAt.delete(key);
        let h = latency.get(sent.source);
        if (!h) latency.set(sent.source, (h = new LatencyHistogram()));
        h.recordMs(performance.now() - sent.at);
      });
      const client = new pg.Client({ connectionString: db });
      await client.connect();
      const nc = await connect({ servers: nats.url });
      const js = nc.jetstream();
      try {
        for (const source of ['outbox', 'jetstream'] as const) {
          for (let k = 0; k < latencyRecords; k++) {
            const i = k % clients;
            const record = next(i) as { conv: string; seq: number };
            sentAt.set(`${record.conv} ${record.seq}`, { at: performance.now(), source });
            if (source === 'outbox') await client.query(`INSERT INTO ${TABLE} (payload) VALUES ($1)`, [JSON.stringify(record)]);
            else await js.publish(SUBJECT, new TextEncoder().encode(JSON.stringify(record)));
            // About 200 records a second: a steady trickle, each on its own, not a backlog.
            await new Promise((resolve) => setTimeout(resolve, 5));
          }
        }
        const deadline = Date.now() + 10_000;
        while (sentAt.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
        if (sentAt.size > 0) report.notes.push(`${sentAt.size} pushes did not arrive within 10 s of the last record.`);
      } finally {
        for (const s of sockets) s.close();
        await client.end();
        await nc.close();
        await system.stop();
      }
    } finally {
      await Promise.allSettled([redis.stop(), postgres.stop(), nats.stop()]);
    }
    const http = drains.find((d) => d.source === 'http');
    report.method.push(
      `One Redpoint server on the Redis engine at a time, each on one shared redis-server; a private PostgreSQL and nats-server -js on the same 2 cores. HTTP: autocannon, 32 connections, one message per request to ${convs} 1:1 conversations, ${seconds} s. Queue: ${fmt.int(backlog)} message records (the next seq of one of the same conversations each) put in the outbox table, or published to the stream, before the server starts; the rate is records applied ÷ time from the first applied to the last (redpoint_ingest_records_total polled every 50 ms), INGEST_BATCH 500; server cores: the server's CPU over that time.`,
      `Latency: ${clients} WebSocket clients connected, ${latencyRecords} records per source, one at a time about every 5 ms (each insert in its own transaction, each publish awaited), from just before the INSERT (or publish) to the push reaching the client.`,
    );
    report.tables.push({
      caption: 'Records applied per second',
      table: {
        header: ['path', 'records', 'records/s', 'server cores', 'records/s per core', 'vs HTTP'],
        rows: drains.map((d) => [
          d.source === 'http' ? 'HTTP POST /v1/messages (1 per request)' : d.source,
          fmt.int(d.records),
          fmtRate(d.perSec),
          d.cores.toFixed(2),
          fmtRate(d.perSec / Math.max(0.01, d.cores)),
          http ? fmt.ratio(d.perSec / http.perSec) : '—',
        ]),
      },
    });
    report.tables.push({
      caption: 'Insert (or publish) to WebSocket push',
      table: {
        header: ['source', 'pushes', 'p50', 'p99', 'max'],
        rows: [...latency].map(([source, h]) => {
          const s = h.summary();
          return [source, fmt.int(s.count), `${fmtMs(s.p50)} ms`, `${fmtMs(s.p99)} ms`, `${fmtMs(s.max)} ms`];
        }),
      },
    });
    report.data = { drains, latency: Object.fromEntries([...latency].map(([k, h]) => [k, h.summary()])) };
    return report;
  },
};

async function fillOutbox(url: string, records: readonly object[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const statement of outboxDdl(TABLE)) await client.query(statement);
    for (let i = 0; i < records.length; i += 2000) {
      await client.query(`INSERT INTO ${TABLE} (payload) SELECT unnest($1::jsonb[])`, [records.slice(i, i + 2000).map((r) => JSON.stringify(r))]);
    }
  } finally {
    await client.end();
  }
}

async function fillStream(nats: NatsServer, records: readonly object[]): Promise<void> {
  const nc = await connect({ servers: nats.url });
  try {
    const jsm = await nc.jetstreamManager();
    await jsm.streams.add({ name: STREAM, subjects: [SUBJECT], retention: RetentionPolicy.Workqueue, storage: StorageType.File }).catch(() => undefined);
    const js = nc.jetstream();
    const encoder = new TextEncoder();
    for (let i = 0; i < records.length; i += 1000) {
      await Promise.all(records.slice(i, i + 1000).map((r) => js.publish(SUBJECT, encoder.encode(JSON.stringify(r)))));
    }
  } finally {
    await nc.close();
  }
}

async function measureDrain(system: RunningSystem, source: Source, records: number): Promise<Drain> {
  const applied = async (): Promise<number> =>
    labelledSum(await system.http.expectOk('GET', '/metrics'), 'redpoint_ingest_records_total', { source, outcome: 'applied' });
  const deadline = Date.now() + 120_000;
  let first = 0;
  while ((first = await applied()) === 0) {
    if (Date.now() > deadline) throw new Error(`${source}: nothing applied within 120 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const started = performance.now();
  const cpu = new CpuWindow(system.pid).start();
  let done = first;
  while (done < records) {
    if (Date.now() > deadline) throw new Error(`${source}: ${done} of ${records} applied within 120 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    done = await applied();
  }
  const used = cpu.stop();
  const seconds = (performance.now() - started) / 1000;
  return { source, records: records - first, perSec: (records - first) / seconds, cores: used.cores };
}
