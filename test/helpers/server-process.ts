import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LogLine } from './logged-server.js';
import { hasExited, keepOutput, killOnExit, stopProcess } from './processes.js';
import { TEST_API_KEY, TEST_JWT_SECRET } from './test-server.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Variables of the machine's environment that would change the server's configuration: never passed on. */
const CONFIG_PREFIXES = ['REDPOINT_', 'REDIS_', 'WS_', 'INGEST_', 'USER_COST_', 'HTTP_USER_', 'BADGE_HOOK_'];
const CONFIG_KEYS = new Set([
  'PORT',
  'HOST',
  'OPS_PORT',
  'WORKERS',
  'STORE_TIMEOUT_MS',
  'LARGE_GROUP_THRESHOLD',
  'SNAPSHOT_EVERY',
  'STREAM_MAX_LEN',
  'LOG_LEVEL',
  'UWS_USE_FALLBACK',
  'DATABASE_URL',
  'PERSIST_INTERVAL_MS',
  'PERSIST_BATCH',
  'PERSIST_BACKLOG_WARN',
  'COLD_AFTER_SECONDS',
  'COLD_SWEEP_SECONDS',
]);

/**
 * How long a server may take to print `listening`: tsx compiles the sources first, once per worker
 * thread with WORKERS. Measured over 20 s for WORKERS=2 at load average 15 (nothing printed yet).
 */
const STARTUP_MS = 60_000;

export interface ServerProcess {
  readonly proc: ChildProcess;
  readonly pid: number;
  /** The main port, from the `listening` log line (0 until then). */
  readonly port: number;
  readonly opsPort: number | undefined;
  readonly url: string;
  /** Every JSON log line printed so far. */
  lines(): LogLine[];
  /** The last 8 KiB of stdout and stderr, for failure messages. */
  output(): string;
  stderr(): string;
  waitLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** Resolves when the process exits. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, bounded; SIGKILL if it does not exit. */
  stop(): Promise<void>;
}

export interface SpawnOptions {
  /** Wait for the `listening` log line (default true). */
  waitListening?: boolean;
  /** How long to wait for it (default STARTUP_MS, 60 s; a file that starts several servers under load may need more). */
  listenTimeoutMs?: number;
  /** Production credentials (the default) or dev mode. */
  devMode?: boolean;
  /** Run a command other than `node --import tsx server/main.ts` (e.g. `npm start`). */
  command?: { file: string; args: string[] };
}

/**
 * Redpoint's real entry point (server/main.ts) in its own process, as an operator runs it: its
 * JSON log lines parsed as they come, its exit awaited. PORT=0 unless `env` says otherwise.
 */
export async function spawnServer(env: Record<string, string>, options: SpawnOptions = {}): Promise<ServerProcess> {
  const base: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined || CONFIG_KEYS.has(key) || CONFIG_PREFIXES.some((p) => key.startsWith(p))) continue;
    base[key] = value;
  }
  const credentials: Record<string, string> = options.devMode ? {} : { REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWT_SECRET: TEST_JWT_SECRET };
  const command = options.command ?? { file: process.execPath, args: ['--import', 'tsx', 'server/main.ts'] };
  const proc = spawn(command.file, command.args, {
    cwd: ROOT,
    // One worker unless a test asks for more: each worker thread compiles the sources again.
    env: { ...base, HOST: '127.0.0.1', PORT: '0', WORKERS: '1', ...credentials, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(proc);
  const output = keepOutput(proc);
  const lines: LogLine[] = [];
  let stderr = '';
  const waiters = new Set<() => void>();
  let partial = '';
  proc.stdout?.on('data', (chunk: Buffer) => {
    partial += chunk.toString();
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    for (const text of parts) {
      if (!text.startsWith('{')) continue;
      try {
        lines.push(JSON.parse(text) as LogLine);
      } catch {
        // not a log line
      }
    }
    for (const wake of [...waiters]) wake();
  });
  proc.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => proc.once('exit', (code, signal) => res({ code, signal })));
  void exited.then(() => {
    for (const wake of [...waiters]) wake();
  });

  const waitLog = (match: (line: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> =>
    new Promise((res, rej) => {
      const check = (): void => {
        const found = lines.find(match);
        if (found) return done(() => res(found));
        if (hasExited(proc)) done(() => rej(new Error(`server exited (${proc.exitCode ?? proc.signalCode}) before the log line:\n${output()}`)));
      };
      const timer = setTimeout(() => done(() => rej(new Error(`no such log line within ${timeoutMs} ms:\n${output()}`))), timeoutMs);
      const done = (then: () => void): void => {
        clearTimeout(timer);
        waiters.delete(check);
        then();
      };
      waiters.add(check);
      check();
    });

  let port = 0;
  let opsPort: number | undefined;
  if (options.waitListening !== false) {
    const listening = await waitLog((l) => l.event === 'listening', options.listenTimeoutMs ?? STARTUP_MS);
    port = Number(listening.port);
    opsPort = listening.opsPort === undefined ? undefined : Number(listening.opsPort);
  }
  const pid = proc.pid;
  if (pid === undefined) throw new Error('spawn failed');
  return {
    proc,
    pid,
    port,
    opsPort,
    url: `http://127.0.0.1:${port}`,
    lines: () => lines,
    output,
    stderr: () => stderr,
    waitLog,
    exited,
    async stop() {
      if (!(await stopProcess(proc, 'SIGTERM', 15_000))) throw new Error(`server ${pid} did not exit`);
    },
  };
}
