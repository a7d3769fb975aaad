import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, keepOutput, killOnExit, stopProcess, waitUntilReady } from './processes.js';

/**
 * A private PostgreSQL for one test file: `initdb` into its own temp dir, its own free port, so
 * the tests never touch the machine's PostgreSQL (5432) and can crash and restart theirs.
 * PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user (Debian's
 * package creates it).
 */
export interface PostgresServer {
  /** postgres://postgres@127.0.0.1:<port>/postgres (trust auth) */
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  pid(): number | undefined;
  /** A new, empty database on this server; its URL. */
  createDatabase(name: string): Promise<string>;
  /** Immediate shutdown (SIGQUIT): no checkpoint, crash recovery at the next start. */
  kill(): Promise<void>;
  /** Start again on the same port and data dir (after kill() or stop({ keep: true })). */
  start(): Promise<void>;
  /** Fast shutdown, then the temp dir is removed (unless `keep`). */
  stop(options?: { keep?: boolean }): Promise<void>;
}

export const POSTGRES_NOT_FOUND =
  'PostgreSQL server binaries not found (initdb, postgres): install them (apt-get install -y postgresql) — the PostgreSQL tests never skip';

const EXIT_TIMEOUT_MS = 10_000;

export function postgresBinDir(): string {
  const candidates = [process.env.PG_BIN_DIR, '/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin'];
  for (const dir of candidates) if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'))) return dir;
  throw new Error(POSTGRES_NOT_FOUND);
}

/** As root: the postgres user's uid and gid (PostgreSQL will not run as root). */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

export async function startPostgres(): Promise<PostgresServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce();
    } catch (err) {
      if (attempt >= 5 || !(err instanceof Error) || !/could not bind|Address already in use/.test(err.message)) throw err;
    }
  }
}

async function startOnce(): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const user = runAs();
  const dir = await mkdtemp(join(tmpdir(), 'redpoint-pg-'));
  if (user) await chown(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  execFileSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(user ?? {}),
  });
  const port = await freePort();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;

  let child: ChildProcess | null = null;
  const launch = async (): Promise<void> => {
    // fsync off: a crash here is an immediate shutdown of the server, not of the machine, so the
    // data survives it all the same, and the tests run several times faster.
    const proc = spawn(
      join(bin, 'postgres'),
      ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=200'],
      { stdio: ['ignore', 'pipe', 'pipe'], ...(user ?? {}) },
    );
    const output = keepOutput(proc);
    killOnExit(proc);
    child = proc;
    await waitUntilReady(proc, () => canConnect(url), {
      timeoutMs: 30_000,
      intervalMs: 50,
      exited: () => new Error(`postgres exited during start (port ${port}):\n${output()}`),
      timedOut: () => new Error(`postgres on port ${port} did not accept connections within 30 s:\n${output()}`),
    });
  };
  const halt = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child;
    child = null;
    if (proc && !(await stopProcess(proc, signal, EXIT_TIMEOUT_MS))) throw new Error(`postgres on port ${port} did not exit`);
  };
  await launch().catch(async (err: unknown) => {
    await halt('SIGQUIT');
    await rm(dir, { recursive: true, force: true });
    throw err;
  });
  return {
    url,
    port,
    dir,
    pid: () => (child as ChildProcess | null)?.pid,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name.replaceAll('"', '')}"`);
      } finally {
        await client.end();
      }
      return url.replace(/\/postgres$/, `/${name}`);
    },
    async kill() {
      await halt('SIGQUIT');
    },
    async start() {
      if (child) return;
      await launch();
    },
    async stop(options = {}) {
      await halt('SIGINT');
      if (!options.keep) await rm(dir, { recursive: true, force: true });
    },
  };
}

async function canConnect(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}
