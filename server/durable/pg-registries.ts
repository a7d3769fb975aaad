import type pg from 'pg';
import type { RegistryBacking } from '../engine/durable-backing.js';

/** Where a registry's rows live: the table and its entry column (schema.ts), constants, never input. */
interface RegistryTable {
  table: string;
  entry: string;
}

/** Topics (schema.ts migration 10): conv -> topic. */
export const TOPICS_TABLE: RegistryTable = { table: 'redpoint_topics', entry: 'topic' };
/** Threads (schema.ts migration 13): conv -> root, a bigint (entries are read back as its text). */
export const THREADS_TABLE: RegistryTable = { table: 'redpoint_threads', entry: 'root' };

/**
 * A conversation's registry of children (topics, threads): one row per (conversation, entry),
 * added before the child is made, and dropped only with the conversation (the operator's delete).
 */
export class PgRegistry implements RegistryBacking {
  constructor(
    private readonly pool: pg.Pool,
    private readonly where: RegistryTable,
  ) {}

  async save(conv: string, entry: string): Promise<void> {
    const { table, entry: column } = this.where;
    await this.pool.query(`INSERT INTO ${table} (conv, ${column}) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [conv, entry]);
  }

  async drop(conv: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.where.table} WHERE conv = $1`, [conv]);
  }

  async load(convs: readonly string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    if (convs.length === 0) return out;
    const { table, entry: column } = this.where;
    const { rows } = await this.pool.query<{ conv: string; entry: string }>(
      `SELECT conv, ${column}::text AS entry FROM ${table} WHERE conv = ANY($1::text[])`,
      [convs],
    );
    for (const { conv, entry } of rows) {
      let entries = out.get(conv);
      if (!entries) out.set(conv, (entries = []));
      entries.push(entry);
    }
    return out;
  }
}
