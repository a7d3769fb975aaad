import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * What the tests' redis-servers (test/helpers/redis-server.ts) and the bench's server processes
 * (bench/lib/child-server.ts) both need from a child process: a free port to give it, its last
 * output for error messages, a wait until it answers, a bounded stop, and no orphan left behind.
 */

/** A port the kernel considers free on 127.0.0.1 (binding port 0); small race until the child binds it. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      if (!address || typeof address === 'string') {
        srv.close();
        reject(new Error('could not get a free port'));
        return;
      }
      srv.close(() => resolve(address.port));
    });
  });
}

const OUTPUT_KEPT = 8_192;

/** Collects the last 8 KiB the child writes to stdout and stderr (spawned with those piped). */
export function keepOutput(proc: ChildProcess): () => string {
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-OUTPUT_KEPT);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  return () => output;
}

export function hasExited(proc: ChildProcess): boolean {
  return proc.exitCode !== null || proc.signalCode !== null;
}

/** Resolves true once `proc` has exited, false if it is still running after `timeoutMs`. */
export function waitForExit(proc: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (hasExited(proc)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    proc.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Sends `signal`, then SIGKILL if the child has not exited within `timeoutMs`; resolves whether it
 * exited (within another `timeoutMs` after the SIGKILL). A child already gone is left alone.
 */
export async function stopProcess(proc: ChildProcess, signal: NodeJS.Signals, timeoutMs: number): Promise<boolean> {
  if (hasExited(proc)) return true;
  const exited = waitForExit(proc, timeoutMs);
  proc.kill(signal);
  if (await exited) return true;
  proc.kill('SIGKILL');
  return waitForExit(proc, timeoutMs);
}

export interface ReadyWait {
  timeoutMs: number;
  intervalMs: number;
  /** The error when the child exits first; `status` is its exit code or signal. */
  exited(status: string): Error;
  timedOut(): Error;
}

/** Polls `ready` every `intervalMs` until it answers true; throws if the child exits first or time runs out. */
export async function waitUntilReady(proc: ChildProcess, ready: () => Promise<boolean>, wait: ReadyWait): Promise<void> {
  const deadline = Date.now() + wait.timeoutMs;
  for (;;) {
    if (hasExited(proc)) throw wait.exited(String(proc.exitCode ?? proc.signalCode));
    if (await ready()) return;
    if (Date.now() > deadline) throw wait.timedOut();
    await delay(wait.intervalMs);
  }
}

/** Children still running, killed (SIGKILL, by pid) if this process exits without stopping them. */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** A crashed or interrupted run must not leave `proc` behind. */
export function killOnExit(proc: ChildProcess): void {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const p of live) p.kill('SIGKILL');
    });
  }
  live.add(proc);
  proc.once('exit', () => live.delete(proc));
}
