import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startNats } from '../helpers/nats-server.js';
import { startPostgres } from '../helpers/postgres-server.js';

describe('private PostgreSQL and NATS for the tests', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step();
  });

  it('PostgreSQL: keeps committed rows across an immediate shutdown and restart', async () => {
    const server = await startPostgres();
    cleanup.push(() => server.stop());
    const url = await server.createDatabase('harness');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query('CREATE TABLE t (id int primary key)');
    await client.query('INSERT INTO t VALUES (1), (2)');
    await client.end();
    await server.kill();
    await server.start();
    const again = new pg.Client({ connectionString: url });
    await again.connect();
    const { rows } = await again.query<{ n: string }>('SELECT count(*) AS n FROM t');
    await again.end();
    expect(rows[0]?.n).toBe('2');
  });

  it('NATS: answers with JetStream on', async () => {
    const server = await startNats();
    cleanup.push(() => server.stop());
    const { connect } = await import('nats');
    const nc = await connect({ servers: server.url });
    const jsm = await nc.jetstreamManager();
    const info = await jsm.getAccountInfo();
    await nc.close();
    expect(info.streams).toBe(0);
  });
});
