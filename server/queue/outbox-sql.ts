/**
 * The outbox's tables, as Redpoint creates them when they are missing (docs/queue-ingest.md shows
 * the same DDL for a message service that owns its schema). `<table>` is INGEST_OUTBOX_TABLE.
 *
 * - `<table>`: the message service inserts here, in the transaction of its message.
 * - `<table>_retry`: Redpoint's bookkeeping of records it will try again (attempts, when).
 * - `<table>_dead`: records Redpoint will never apply, with the reason.
 * - a statement trigger NOTIFYs channel `<table>` on insert, so a waiting consumer wakes at once.
 */
export function outboxDdl(table: string): string[] {
  return [...OUTBOX_PARTS.flatMap((part) => part.create(table))];
}

/**
 * Each object of the outbox, how to tell it exists and how to create it: Redpoint creates only
 * what is missing, so a message service that owns the tables need grant it no more than
 * SELECT, INSERT, UPDATE and DELETE on them.
 */
export const OUTBOX_PARTS: ReadonlyArray<{ exists: (table: string) => string; create: (table: string) => string[] }> = [
  {
    exists: (table) => `SELECT to_regclass('${table}') IS NOT NULL AS ok`,
    create: (table) => [
      `CREATE TABLE IF NOT EXISTS ${table} (id bigserial PRIMARY KEY, payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
    ],
  },
  {
    exists: (table) => `SELECT to_regclass('${table}_retry') IS NOT NULL AS ok`,
    create: (table) => [
      `CREATE TABLE IF NOT EXISTS ${table}_retry (id bigint PRIMARY KEY, attempts integer NOT NULL, next_at timestamptz NOT NULL, reason text NOT NULL)`,
    ],
  },
  {
    exists: (table) => `SELECT to_regclass('${table}_dead') IS NOT NULL AS ok`,
    create: (table) => [
      `CREATE TABLE IF NOT EXISTS ${table}_dead (id bigint PRIMARY KEY, payload jsonb NOT NULL, created_at timestamptz NOT NULL, failed_at timestamptz NOT NULL DEFAULT now(), reason text NOT NULL)`,
    ],
  },
  {
    exists: (table) => `SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass('${table}') AND tgname = '${lastPart(table)}_notify') AS ok`,
    create: (table) => [
      `CREATE OR REPLACE FUNCTION ${table}_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('${channelOf(table)}', ''); RETURN NULL; END $$`,
      `CREATE OR REPLACE TRIGGER ${lastPart(table)}_notify AFTER INSERT ON ${table} FOR EACH STATEMENT EXECUTE FUNCTION ${table}_notify()`,
    ],
  },
];

/** A table name, optionally schema-qualified, that needs no quoting: lower case letters, digits, `_`. */
export const OUTBOX_TABLE_PATTERN = '^([a-z_][a-z0-9_]{0,40}\\.)?[a-z_][a-z0-9_]{0,40}$';

/** The LISTEN/NOTIFY channel of a table. */
export function channelOf(table: string): string {
  return table.replace('.', '_');
}

function lastPart(table: string): string {
  return table.slice(table.indexOf('.') + 1);
}

/** Taken in order, rows waiting for a retry left out; locked so that no one else takes them meanwhile. */
export function takeSql(table: string): string {
  return `SELECT o.id::text AS id, o.payload, coalesce(r.attempts, 0) AS attempts
    FROM ${table} o LEFT JOIN ${table}_retry r ON r.id = o.id
    WHERE r.id IS NULL OR r.next_at <= now()
    ORDER BY o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED`;
}

export function settleSql(table: string): { applied: string; dead: string; forget: string; retry: string } {
  return {
    applied: `DELETE FROM ${table} WHERE id = ANY($1::bigint[])`,
    dead: `WITH gone AS (DELETE FROM ${table} WHERE id = ANY($1::bigint[]) RETURNING id, payload, created_at)
      INSERT INTO ${table}_dead (id, payload, created_at, reason)
      SELECT gone.id, gone.payload, gone.created_at, why.reason FROM gone JOIN unnest($1::bigint[], $2::text[]) AS why(id, reason) ON why.id = gone.id
      ON CONFLICT (id) DO NOTHING`,
    forget: `DELETE FROM ${table}_retry WHERE id = ANY($1::bigint[])`,
    retry: `INSERT INTO ${table}_retry (id, attempts, next_at, reason)
      SELECT id, attempts, now() + delay_ms * interval '1 millisecond', reason FROM unnest($1::bigint[], $2::int[], $3::float8[], $4::text[]) AS r(id, attempts, delay_ms, reason)
      ON CONFLICT (id) DO UPDATE SET attempts = EXCLUDED.attempts, next_at = EXCLUDED.next_at, reason = EXCLUDED.reason`,
  };
}

export function backlogSql(table: string): string {
  return `SELECT count(*)::float8 AS waiting, coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest FROM ${table}`;
}
