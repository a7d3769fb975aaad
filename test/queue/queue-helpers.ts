import { connect, type JetStreamClient, type NatsConnection } from 'nats';
import pg from 'pg';
import type { Registry } from 'prom-client';

/** Polls `check` until it returns a value other than undefined, or fails naming `what` after `timeoutMs`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (let pause = 10; ; pause = Math.min(pause * 2, 200)) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/** The message service's side of the outbox: rows inserted in its own transactions. */
export class OutboxWriter {
  private constructor(
    readonly client: pg.Client,
    readonly table: string,
  ) {}

  static async open(url: string, table = 'redpoint_outbox'): Promise<OutboxWriter> {
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    await client.connect();
    return new OutboxWriter(client, table);
  }

  /** One transaction, one row per record (as a message service inserts next to its message). */
  async insert(records: readonly unknown[]): Promise<void> {
    if (records.length === 0) return;
    await this.client.query('BEGIN');
    await this.client.query(`INSERT INTO ${this.table} (payload) SELECT unnest($1::jsonb[])`, [records.map((r) => JSON.stringify(r))]);
    await this.client.query('COMMIT');
  }

  async count(table = this.table): Promise<number> {
    const { rows } = await this.client.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`);
    return Number(rows[0]?.n ?? 0);
  }

  async dead(): Promise<{ payload: unknown; reason: string }[]> {
    const { rows } = await this.client.query<{ payload: unknown; reason: string }>(`SELECT payload, reason FROM ${this.table}_dead ORDER BY id`);
    return rows;
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => undefined);
  }
}

/** The message service's side of JetStream: publishes and reads back the dead letters. */
export class NatsWriter {
  private constructor(
    readonly nc: NatsConnection,
    readonly js: JetStreamClient,
  ) {}

  static async open(url: string): Promise<NatsWriter> {
    const nc = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    return new NatsWriter(nc, nc.jetstream());
  }

  /** Publishes each record, retrying (as a message service would) while NATS is restarting. */
  async publish(records: readonly unknown[], subject = 'redpoint.ingest'): Promise<void> {
    const encode = (r: unknown): Uint8Array => new TextEncoder().encode(typeof r === 'string' ? r : JSON.stringify(r));
    await Promise.all(
      records.map((r) => eventually(`published to ${subject}`, async () => (await this.js.publish(subject, encode(r), { timeout: 2_000 })) && true)),
    );
  }

  /** Pending and unacked records of the shared consumer. */
  async waiting(stream = 'REDPOINT_INGEST'): Promise<number> {
    const info = await (await this.nc.jetstreamManager()).consumers.info(stream, 'redpoint');
    return info.num_pending + info.num_ack_pending;
  }

  async dead(stream = 'REDPOINT_INGEST_DEAD'): Promise<{ data: string; reason: string }[]> {
    const jsm = await this.nc.jetstreamManager();
    const info = await jsm.streams.info(stream);
    const out: { data: string; reason: string }[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(stream, { seq });
      out.push({ data: new TextDecoder().decode(m.data), reason: m.header.get('Redpoint-Dead-Reason') });
    }
    return out;
  }

  async close(): Promise<void> {
    await this.nc.close().catch(() => undefined);
  }
}

/** A counter's value for these labels (0 when it has none). */
export async function counterValue(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  return values.filter((v) => Object.entries(labels).every(([k, l]) => (v.labels as Record<string, unknown>)[k] === l)).reduce((n, v) => n + v.value, 0);
}
