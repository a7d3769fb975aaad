import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, keepOutput, killOnExit, stopProcess, waitUntilReady } from './processes.js';
import { findOnPath } from './redis-server.js';

/**
 * A private `nats-server -js` for one test file: its own free port and its own JetStream store
 * dir, so the tests never touch the machine's NATS (4222) and can kill and restart theirs.
 */
export interface NatsServer {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  pid(): number | undefined;
  /** SIGKILL; the store dir is kept for start(). */
  kill(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export const NATS_NOT_FOUND = 'nats-server not found on PATH: install it (apt-get install -y nats-server) — the NATS tests never skip';

export async function startNats(): Promise<NatsServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce();
    } catch (err) {
      if (attempt >= 5 || !(err instanceof Error) || !/address already in use/i.test(err.message)) throw err;
    }
  }
}

async function startOnce(): Promise<NatsServer> {
  // Debian installs it in /usr/sbin, which is not on every user's PATH.
  const binary = findOnPath('nats-server') ?? ['/usr/sbin/nats-server', '/usr/bin/nats-server'].find((p) => existsSync(p));
  if (!binary) throw new Error(NATS_NOT_FOUND);
  const dir = await mkdtemp(join(tmpdir(), 'redpoint-nats-'));
  const port = await freePort();
  let child: ChildProcess | null = null;
  const launch = async (): Promise<void> => {
    const proc = spawn(binary, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    const output = keepOutput(proc);
    killOnExit(proc);
    child = proc;
    await waitUntilReady(proc, () => answersInfo(port), {
      timeoutMs: 15_000,
      intervalMs: 20,
      exited: () => new Error(`nats-server exited during start (port ${port}):\n${output()}`),
      timedOut: () => new Error(`nats-server on port ${port} did not answer within 15 s:\n${output()}`),
    });
  };
  const halt = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child;
    child = null;
    if (proc && !(await stopProcess(proc, signal, 10_000))) throw new Error(`nats-server on port ${port} did not exit`);
  };
  await launch().catch(async (err: unknown) => {
    await halt('SIGKILL');
    await rm(dir, { recursive: true, force: true });
    throw err;
  });
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    dir,
    pid: () => (child as ChildProcess | null)?.pid,
    async kill() {
      await halt('SIGKILL');
    },
    async start() {
      if (!child) await launch();
    },
    async stop() {
      await halt('SIGTERM');
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A NATS server greets every connection with an INFO line. */
function answersInfo(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (chunk) => done(chunk.toString().startsWith('INFO')));
  });
}
