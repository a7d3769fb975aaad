import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COLUMNS_SQL, OUTBOX_TABLES, shapeProblems } from '../../server/queue/outbox-sql.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';

/**
 * docs/queue-ingest.md shows a message service the DDL to create the outbox itself: a second copy
 * of the columns OUTBOX_TABLES declares. Run as written, it must make tables the shape check
 * accepts, with no column the declaration lacks (a column dropped from the code stays out of
 * the docs too).
 */
describe('the outbox DDL in docs/queue-ingest.md', () => {
  let postgres: PostgresServer;
  beforeAll(async () => {
    postgres = await startPostgres();
  });
  afterAll(async () => {
    await postgres?.stop();
  });

  it('makes the tables OUTBOX_TABLES declares', async () => {
    const doc = await readFile(new URL('../../docs/queue-ingest.md', import.meta.url), 'utf8');
    const ddl = /## The outbox\n[\s\S]*?```sql\n([\s\S]*?)```/.exec(doc)?.[1];
    if (!ddl) throw new Error('docs/queue-ingest.md: no sql block under "## The outbox"');
    const client = new pg.Client({ connectionString: await postgres.createDatabase('outboxdoc') });
    await client.connect();
    try {
      await client.query(ddl);
      for (const spec of OUTBOX_TABLES) {
        const table = `redpoint_outbox${spec.suffix}`;
        const { rows } = await client.query<{ name: string | null; type: string | null; kind: string }>(COLUMNS_SQL, [table]);
        expect(shapeProblems(spec.suffix, rows), table).toEqual([]);
        expect(rows.map((r) => r.name).sort(), table).toEqual(spec.columns.map((c) => c.name).sort());
      }
    } finally {
      await client.end();
    }
  });
});
