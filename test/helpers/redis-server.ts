import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants as fsConstants, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { freePort, keepOutput, killOnExit, stopProcess, waitUntilReady } from './processes.js';

/**
 * A private `redis-server` for one test file: its own port and its own temp dir, so the tests
 * never touch the machine's Redis (6379) and never depend on what another suite left behind.
 */
export interface RedisServerOptions {
  /** AOF persistence with this fsync policy; off (no persistence at all) by default. */
  aof?: false | 'everysec' | 'always';
  /** Bound on waiting for PING after a start or restart. */
  startTimeoutMs?: number;
  /** More redis.conf lines, appended (e.g. `cluster-enabled yes` for a cluster node). */
  extraConfig?: readonly string[];
  /** Another redis-server binary than the one on PATH (e.g. a build with symbols, for profiling). */
  binary?: string;
  /** A command the server runs under, with its arguments (e.g. valgrind and its options). */
  runUnder?: readonly string[];
  /** More arguments after the config file (e.g. `--sentinel`). */
  args?: readonly string[];
  /** Serve TLS only (no plain port), with these PEM files; `url` is then `rediss://`. */
  tls?: TlsFiles;
  /** The password PING must present to tell that the server is up (`requirepass`). */
  password?: string;
}

/** PEM files of a TLS server (test/helpers/tls-certs.ts makes them). */
export interface TlsFiles {
  cert: string;
  key: string;
  ca: string;
}

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** The running server's process id (under `runUnder`: that command's). */
  pid(): number | undefined;
  /** Graceful stop (SIGTERM: Redis flushes the AOF), then the temp dir is removed. */
  stop(): Promise<void>;
  /** SIGKILL: a crash. The dir is kept so that `restart()` can show what survived. */
  kill(): Promise<void>;
  /** Stop gracefully if still running, then start again on the same port with the same dir. */
  restart(): Promise<void>;
}

export const REDIS_NOT_FOUND = 'redis-server not found on PATH: install it (apt-get install -y redis-server) — the Redis tests never skip';

const EXIT_TIMEOUT_MS = 10_000;
const POLL_INTERVAL_MS = 20;

/**
 * freePort() hands out a port that nothing holds right now; another test process may bind it
 * before this redis-server does (or its cluster bus port, port + 10000). Such a start is tried
 * again on a new port; any other failure is thrown as it is.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options);
    } catch (err) {
      if (attempt >= 5 || !(err instanceof Error) || !err.message.includes('Address already in use')) throw err;
    }
  }
}

async function startOnce(options: RedisServerOptions): Promise<RedisServer> {
  const bin = options.binary ?? findOnPath('redis-server');
  if (!bin) throw new Error(REDIS_NOT_FOUND);
  const [command, ...prefixArgs] = [...(options.runUnder ?? []), bin];
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'redpoint-redis-'));
  const confPath = join(dir, 'redis.conf');
  await writeFile(confPath, config(port, dir, options.aof ?? false, options.tls) + (options.extraConfig ?? []).map((line) => `${line}\n`).join(''));
  const startTimeout = options.startTimeoutMs ?? 15_000;

  let child: ChildProcess | null = null;
  const launch = async (): Promise<void> => {
    const proc = spawn(command as string, [...prefixArgs, confPath, ...(options.args ?? [])], { stdio: ['ignore', 'pipe', 'pipe'] });
    const output = keepOutput(proc);
    killOnExit(proc);
    child = proc;
    // A Redis loading its AOF answers -LOADING; only +PONG means it takes commands.
    await waitUntilReady(proc, () => pingOnce(port, options.tls, options.password), {
      timeoutMs: startTimeout,
      intervalMs: POLL_INTERVAL_MS,
      exited: () => new Error(`redis-server exited during start (port ${port}):\n${output()}`),
      timedOut: () => new Error(`redis-server on port ${port} did not answer PING within ${startTimeout} ms:\n${output()}`),
    });
  };
  const halt = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child;
    child = null;
    if (proc && !(await stopProcess(proc, signal, EXIT_TIMEOUT_MS))) throw new Error(`redis-server on port ${port} did not exit`);
  };

  await launch().catch(async (err: unknown) => {
    await halt('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw err;
  });

  return {
    url: `${options.tls ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
    port,
    dir,
    pid: () => (child as ChildProcess | null)?.pid,
    async stop() {
      await halt('SIGTERM');
      await rm(dir, { recursive: true, force: true });
    },
    async kill() {
      await halt('SIGKILL');
    },
    async restart() {
      await halt('SIGTERM');
      await launch();
    },
  };
}

function config(port: number, dir: string, aof: false | 'everysec' | 'always', tls: TlsFiles | undefined): string {
  const lines = [
    ...(tls
      ? [
          'port 0',
          `tls-port ${port}`,
          `tls-cert-file ${tls.cert}`,
          `tls-key-file ${tls.key}`,
          `tls-ca-cert-file ${tls.ca}`,
          'tls-auth-clients no',
          'tls-replication yes',
        ]
      : [`port ${port}`]),
    'bind 127.0.0.1',
    `dir ${dir}`,
    'save ""',
    'daemonize no',
    'logfile ""',
    'protected-mode yes',
    aof ? 'appendonly yes' : 'appendonly no',
  ];
  if (aof) lines.push(`appendfsync ${aof}`);
  return `${lines.join('\n')}\n`;
}

export function findOnPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not in this PATH entry
    }
  }
  return null;
}

function pingOnce(port: number, tls: TlsFiles | undefined, password: string | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    let reply = '';
    const socket = tls ? tlsConnect({ host: '127.0.0.1', port, ca: readFileSync(tls.ca) }) : createConnection({ host: '127.0.0.1', port });
    const ping = password === undefined ? 'PING\r\n' : `AUTH ${password}\r\nPING\r\n`;
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once(tls ? 'secureConnect' : 'connect', () => socket.write(ping));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      const lines = reply.split('\r\n');
      const last = lines[password === undefined ? 0 : 1];
      if (lines.length > (password === undefined ? 1 : 2)) done(last === '+PONG');
    });
  });
}
