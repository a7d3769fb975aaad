import pg from 'pg';
import type { Logger } from 'pino';
import { addressOfUrl, postgresFailure, StartFailure } from '../start-failure.js';
import { backlogSql, COLUMNS_SQL, channelOf, OUTBOX_PARTS, settleSql, shapeProblems, takeSql } from './outbox-sql.js';
import type { Outcome } from './outcome.js';
import type { Delivery, DeliveryBatch, QueueSource } from './source.js';

export interface OutboxOptions {
  url: string;
  table: string;
  /** Without a notification (a missed one, another process holding the turn), look again after this long. */
  pollMs?: number;
}

const DEFAULT_POLL_MS = 1_000;
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * The transactional outbox on PostgreSQL. A batch is one transaction: it takes the turn (a
 * transaction-scoped advisory lock, so processes take turns and rows are applied in id order),
 * locks the oldest rows that are not waiting for a retry, and — once the consumer has final
 * outcomes — deletes the applied ones, moves the dead ones to `<table>_dead` and books the
 * retries in `<table>_retry`, all in that one commit. A process that dies mid-batch leaves an
 * aborted transaction: the rows and the turn are free again, and the next batch applies them
 * again, which changes nothing already applied.
 */
export class OutboxSource implements QueueSource {
  readonly name = 'outbox';
  private readonly pool: pg.Pool;
  private listener: pg.Client | undefined;
  private notified = false;
  private wake: (() => void) | undefined;
  private closed = false;
  private readonly lockKey: string;

  constructor(
    private readonly options: OutboxOptions,
    private readonly log: Logger,
  ) {
    this.pool = new pg.Pool({ connectionString: options.url, max: 3, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, application_name: 'redpoint-outbox' });
    // A connection lost while idle in the pool, or while checked out (its query then fails too):
    // without a listener, 'error' would end the process.
    this.pool.on('error', (err) => this.log.warn({ event: 'ingest_outbox_connection', err: err.message }, `outbox: connection lost: ${err.message}`));
    this.pool.on('connect', (client) => client.on('error', () => undefined));
    this.lockKey = `redpoint_outbox:${options.table}`;
  }

  async open(): Promise<void> {
    const client = await this.pool.connect().catch((err: unknown) => {
      throw this.failure(err, 'the login');
    });
    try {
      await client.query('BEGIN');
      // Two processes starting at once must not race CREATE ... IF NOT EXISTS (it is not atomic).
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`${this.lockKey}:ddl`]);
      const { table } = this.options;
      // The table first: one of the wrong shape is refused before anything is created beside it
      // (and the transaction takes back whatever was).
      for (const part of OUTBOX_PARTS) {
        const found = await client.query<{ ok: boolean }>(part.exists(table));
        if (found.rows[0]?.ok) {
          if (part.suffix === undefined) continue;
          const columns = await client.query<{ name: string | null; type: string | null; kind: string }>(COLUMNS_SQL, [`${table}${part.suffix}`]);
          const problems = shapeProblems(part.suffix, columns.rows);
          if (problems.length > 0) throw new StartFailure(`INGEST_OUTBOX_TABLE: ${table}${part.suffix} is not an outbox table: ${problems.join('; ')}`);
          continue;
        }
        for (const statement of part.create(table)) await client.query(statement);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw this.failure(err, "the outbox's tables");
    } finally {
      client.release();
    }
    await this.listen();
  }

  /** A start-up failure naming INGEST_OUTBOX_URL and where it points. */
  private failure(err: unknown, doing: string): Error {
    return postgresFailure({ variable: 'INGEST_OUTBOX_URL', address: addressOfUrl(this.options.url, 5432) }, err, doing);
  }

  async next(max: number, signal: AbortSignal): Promise<DeliveryBatch | null> {
    while (!signal.aborted) {
      this.notified = false;
      const batch = await this.take(max);
      if (batch) return batch;
      await this.waitForRows(signal);
    }
    return null;
  }

  async backlog(): Promise<{ waiting: number; oldestSeconds: number }> {
    const { rows } = await this.pool.query<{ waiting: number; oldest: number }>(backlogSql(this.options.table));
    return { waiting: rows[0]?.waiting ?? 0, oldestSeconds: Math.max(0, rows[0]?.oldest ?? 0) };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.wake?.();
    await this.listener?.end().catch(() => undefined);
    await this.pool.end();
  }

  /** One transaction holding the turn and the oldest rows, or null (nothing to take, or another process has the turn). */
  private async take(max: number): Promise<DeliveryBatch | null> {
    const client = await this.pool.connect();
    let open = false;
    try {
      await client.query('BEGIN');
      open = true;
      const turn = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [this.lockKey]);
      const rows = turn.rows[0]?.ok ? (await client.query<{ id: string; payload: unknown; attempts: number }>(takeSql(this.options.table), [max])).rows : [];
      if (rows.length === 0) {
        await client.query('COMMIT');
        client.release();
        return null;
      }
      return this.batchOf(client, rows);
    } catch (err) {
      if (open) await client.query('ROLLBACK').catch(() => undefined);
      // A broken connection is not given back to the pool.
      client.release(err instanceof Error ? err : true);
      throw err;
    }
  }

  private batchOf(client: pg.PoolClient, rows: { id: string; payload: unknown; attempts: number }[]): DeliveryBatch {
    const sql = settleSql(this.options.table);
    let done = false;
    const finish = (err?: Error): void => {
      if (done) return;
      done = true;
      client.release(err ?? false);
    };
    const deliveries: Delivery[] = rows.map((row) => ({ id: row.id, attempts: row.attempts, body: () => row.payload }));
    return {
      deliveries,
      keepAlive: async () => {
        // The transaction is the hold: a connection that is gone has released the rows already.
        await client.query('SELECT 1').catch((err: Error) => {
          finish(err);
          throw err;
        });
      },
      settle: async (outcomes: readonly Outcome[]) => {
        const applied: string[] = [];
        const dead: { ids: string[]; reasons: string[] } = { ids: [], reasons: [] };
        const retry: { ids: string[]; attempts: number[]; delays: number[]; reasons: string[] } = { ids: [], attempts: [], delays: [], reasons: [] };
        outcomes.forEach((o, i) => {
          const row = rows[i];
          if (!row) return;
          if (o.kind === 'applied') applied.push(row.id);
          else if (o.kind === 'dead') {
            dead.ids.push(row.id);
            dead.reasons.push(o.reason);
          } else {
            retry.ids.push(row.id);
            retry.attempts.push(row.attempts + 1);
            retry.delays.push(o.delayMs);
            retry.reasons.push(o.reason);
          }
        });
        try {
          if (applied.length > 0) await client.query(sql.applied, [applied]);
          if (dead.ids.length > 0) await client.query(sql.dead, [dead.ids, dead.reasons]);
          const final = [...applied, ...dead.ids].filter((id) => (rows.find((r) => r.id === id)?.attempts ?? 0) > 0);
          if (final.length > 0) await client.query(sql.forget, [final]);
          if (retry.ids.length > 0) await client.query(sql.retry, [retry.ids, retry.attempts, retry.delays, retry.reasons]);
          await client.query('COMMIT');
          finish();
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          finish(err as Error);
          throw err;
        }
      },
      release: async () => {
        await client.query('ROLLBACK').catch(() => undefined);
        finish();
      },
    };
  }

  private async waitForRows(signal: AbortSignal): Promise<void> {
    if (this.notified || signal.aborted || this.closed) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.options.pollMs ?? DEFAULT_POLL_MS);
      signal.addEventListener('abort', done, { once: true });
      this.wake = done;
    });
  }

  /** LISTEN on its own connection, again after it is lost: polling covers the gap meanwhile. */
  private async listen(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({
      connectionString: this.options.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      application_name: 'redpoint-outbox-listen',
    });
    const again = (): void => {
      if (this.listener !== client || this.closed) return;
      this.listener = undefined;
      setTimeout(() => void this.listen(), DEFAULT_POLL_MS).unref();
    };
    client.on('error', again);
    client.on('end', again);
    client.on('notification', () => {
      this.notified = true;
      this.wake?.();
    });
    this.listener = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${channelOf(this.options.table)}`);
    } catch {
      await client.end().catch(() => undefined);
      again();
    }
  }
}
