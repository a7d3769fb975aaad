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

/** A column of an outbox table: the type PostgreSQL reports for it (format_type), and its DDL after the name. */
interface OutboxColumn {
  name: string;
  type: 'bigint' | 'integer' | 'jsonb' | 'text' | 'timestamp with time zone';
  ddl: string;
}

/** A column whose DDL type is the reported one unless `ddlType` says otherwise (bigserial is reported as bigint). */
const column = (name: string, type: OutboxColumn['type'], rest: string, ddlType: string = type): OutboxColumn => ({ name, type, ddl: `${ddlType} ${rest}` });
const TIME = 'timestamp with time zone';

/**
 * The outbox's three tables, declared once: the DDL that creates them and the shape check of a
 * table that exists (`shapeProblems`) both come from here. These are the columns the reader and
 * the settlement statements below use; a table may have more.
 */
export const OUTBOX_TABLES: ReadonlyArray<{ suffix: '' | '_retry' | '_dead'; columns: readonly OutboxColumn[] }> = [
  {
    suffix: '',
    columns: [column('id', 'bigint', 'PRIMARY KEY', 'bigserial'), column('payload', 'jsonb', 'NOT NULL'), column('created_at', TIME, 'NOT NULL DEFAULT now()')],
  },
  {
    suffix: '_retry',
    columns: [
      column('id', 'bigint', 'PRIMARY KEY'),
      column('attempts', 'integer', 'NOT NULL'),
      column('next_at', TIME, 'NOT NULL'),
      column('reason', 'text', 'NOT NULL'),
    ],
  },
  {
    suffix: '_dead',
    columns: [
      column('id', 'bigint', 'PRIMARY KEY'),
      column('payload', 'jsonb', 'NOT NULL'),
      column('created_at', TIME, 'NOT NULL'),
      column('failed_at', TIME, 'NOT NULL DEFAULT now()'),
      column('reason', 'text', 'NOT NULL'),
    ],
  },
];

/** The columns of an existing table (name and format_type), or no rows when it does not exist; $1 is the table name. */
export const COLUMNS_SQL = `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, c.relkind AS kind
  FROM pg_class c LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  WHERE c.oid = to_regclass($1)`;

/**
 * What is wrong with an existing table as outbox table `suffix` (empty: nothing), from its
 * columns as COLUMNS_SQL lists them: not a table, a column of another type, columns missing.
 */
export function shapeProblems(
  suffix: (typeof OUTBOX_TABLES)[number]['suffix'],
  found: ReadonlyArray<{ name: string | null; type: string | null; kind: string }>,
): string[] {
  const spec = OUTBOX_TABLES.find((t) => t.suffix === suffix);
  if (!spec) throw new Error(`no outbox table ${suffix}`);
  const kind = found[0]?.kind;
  // r: a table, p: a partitioned table. A view, a sequence, an index cannot hold the rows.
  if (kind !== undefined && kind !== 'r' && kind !== 'p') return ['it is not a table'];
  const types = new Map(found.map((c) => [c.name, c.type]));
  const problems: string[] = [];
  const missing: string[] = [];
  for (const column of spec.columns) {
    const type = types.get(column.name);
    if (type === undefined) missing.push(`${column.name} (${column.type})`);
    else if (type !== column.type) problems.push(`${column.name} is ${type} (an outbox needs ${column.type})`);
  }
  if (missing.length > 0) problems.push(`it lacks ${missing.join(', ')}`);
  return problems;
}

/**
 * Each object of the outbox, how to tell it exists and how to create it: Redpoint creates only
 * what is missing, so a message service that owns the tables need grant it no more than
 * SELECT, INSERT, UPDATE and DELETE on them. A table has `suffix`; its shape is checked when it exists.
 */
export const OUTBOX_PARTS: ReadonlyArray<{
  suffix?: (typeof OUTBOX_TABLES)[number]['suffix'];
  exists: (table: string) => string;
  create: (table: string) => string[];
}> = [
  ...OUTBOX_TABLES.map((spec) => ({
    suffix: spec.suffix,
    exists: (table: string) => `SELECT to_regclass('${table}${spec.suffix}') IS NOT NULL AS ok`,
    create: (table: string) => [`CREATE TABLE IF NOT EXISTS ${table}${spec.suffix} (${spec.columns.map((c) => `${c.name} ${c.ddl}`).join(', ')})`],
  })),
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
