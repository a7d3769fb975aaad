import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { Engine } from '../../server/engine/engine.js';

/**
 * Waits of the Redis engine suites, for states that raise no event: they poll, bounded, and
 * fail with what they were waiting for.
 */
const POLL_MS = 25;

async function poll(done: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what} (waited ${timeoutMs} ms)`);
    await delay(POLL_MS);
  }
}

/** Until `engine.ready()` answers `ready`: its client reconnected after a restart, or noticed the server went away. */
export function waitReady(engine: Engine, ready = true, timeoutMs = 15_000): Promise<void> {
  return poll(async () => (await engine.ready()) === ready, timeoutMs, ready ? 'engine did not become ready' : 'engine still ready after the server went away');
}

/**
 * Until Redis has written every append to the AOF file (`aof_buffer_length:0`): with everysec,
 * Redis postpones the write while a background fsync is slow (a loaded machine), and a SIGKILL
 * then loses what is still in its buffer, while what is written survives in the page cache.
 */
export async function aofWritten(url: string, timeoutMs = 10_000): Promise<void> {
  const admin = new Redis(url);
  try {
    await poll(async () => /^aof_buffer_length:0\r?$/m.test(await admin.info('persistence')), timeoutMs, 'Redis did not write its AOF buffer');
  } finally {
    admin.disconnect();
  }
}

/**
 * Pauses writes on the Redis behind `admin` (CLIENT PAUSE ... WRITE), starts `run` and resolves
 * once the script it sent is held there: sent, not yet run. The caller unpauses, kills or moves
 * things, then awaits `inFlight` (a rejection is left for the caller to check, never unhandled).
 */
export async function holdScript<T>(admin: Redis, run: () => Promise<T>, timeoutMs = 5_000): Promise<{ inFlight: Promise<T> }> {
  await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE');
  const inFlight = run();
  inFlight.catch(() => undefined);
  // A client blocked by the pause on a script (FCALL, or EVAL/EVALSHA); CLIENT LIST is not a write, so `admin` may ask.
  const held = /^(?=.* flags=\w*b)(?=.* cmd=(fcall|eval(sha)?)\b)/m;
  await poll(async () => held.test(String(await admin.call('CLIENT', 'LIST'))), timeoutMs, 'no script held by CLIENT PAUSE');
  return { inFlight };
}
