import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { keepOutput, killOnExit, stopProcess, waitUntilReady } from '../../test/helpers/processes.js';
import { HttpTarget } from './http.js';
import { raiseFileLimit } from './proc.js';

export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface ChildServer {
  readonly name: string;
  readonly port: number;
  readonly pid: number;
  /** The last lines the child printed (for error messages). */
  output(): string;
  /** SIGTERM, then SIGKILL if it has not exited within the bound. */
  stop(): Promise<void>;
}

export interface SpawnOptions {
  name: string;
  /** Script path relative to the project root, run with `node --import tsx`. */
  script: string;
  port: number;
  env: Record<string, string>;
  /** Path polled until it answers 200. */
  readyPath: string;
  readyTimeoutMs?: number;
  /** Node options before the script (`--cpu-prof`, `--max-old-space-size=...`). */
  nodeArgs?: readonly string[];
  /** Raise the child's open-file limit to this (sockets for many clients); see raiseFileLimit. */
  maxFiles?: number;
}

const STOP_TIMEOUT_MS = 10_000;

/**
 * Starts a server in its own process, so the load generator never shares its event loop.
 * One node process (tsx as a loader, not its CLI wrapper), so its pid is the server's.
 */
export async function spawnServer(options: SpawnOptions): Promise<ChildServer> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('REDPOINT_') && k !== 'REDIS_URL' && k !== 'REDIS_CLUSTER_NODES' && k !== 'UWS_USE_FALLBACK') env[k] = v;
  }
  // One server thread unless the scenario asks for more (WORKERS defaults to one per core in production).
  Object.assign(env, { WORKERS: '1' }, options.env, { PORT: String(options.port) });
  const proc = spawn(process.execPath, [...(options.nodeArgs ?? []), '--import', 'tsx', options.script], {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(proc);
  const output = keepOutput(proc);
  // BENCH_SERVER_LOG=<prefix>: each server's whole output also goes to <prefix>.<name>.log (for
  // a run with BENCH_SERVER_NODE_ARGS=--trace-gc, say); the bench itself keeps only the tail.
  const logPrefix = process.env.BENCH_SERVER_LOG;
  if (logPrefix) {
    const file = createWriteStream(`${logPrefix}.${options.name}.log`, { flags: 'a' });
    proc.stdout?.pipe(file, { end: false });
    proc.stderr?.pipe(file, { end: false });
    proc.once('exit', () => file.end());
  }
  const pid = proc.pid;
  if (pid === undefined) throw new Error(`${options.name}: spawn failed`);
  // Before it is ready, so before any client can connect.
  if (options.maxFiles !== undefined) await raiseFileLimit(pid, options.maxFiles);
  let stopping = false;
  proc.once('exit', (code, signal) => {
    if (!stopping) process.stderr.write(`\n!! ${options.name} (pid ${pid}) exited unexpectedly (${code ?? signal}); its last output:\n${output()}\n`);
  });

  const stop = async (): Promise<void> => {
    stopping = true;
    await stopProcess(proc, 'SIGTERM', STOP_TIMEOUT_MS);
  };

  try {
    await waitReady(proc, options.port, options.readyPath, options.readyTimeoutMs ?? 30_000);
  } catch (err) {
    await stop();
    throw new Error(`${options.name} did not start: ${err instanceof Error ? err.message : String(err)}\n${output()}`);
  }
  return { name: options.name, port: options.port, pid, output, stop };
}

async function waitReady(proc: ChildProcess, port: number, path: string, timeoutMs: number): Promise<void> {
  const http = new HttpTarget(port, {}, 1, 1_000);
  try {
    await waitUntilReady(proc, async () => (await http.send('GET', path).catch(() => null))?.status === 200, {
      timeoutMs,
      intervalMs: 100,
      exited: (status) => new Error(`exited (${status})`),
      timedOut: () => new Error(`GET ${path} not 200 within ${timeoutMs} ms`),
    });
  } finally {
    http.close();
  }
}
