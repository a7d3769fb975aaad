import type { Redis } from 'ioredis';
import { LatencyHistogram } from '../lib/histogram.js';
import { redisStats, statsDelta } from '../lib/redis-info.js';

/** One system's figures over one measured window. */
export interface Window {
  /** Operations done (messages, reads). */
  ops: number;
  /** Deliveries (group members reached; equals ops for reads and one-to-one). */
  units: number;
  redisCpuSeconds: number;
  nodeCpuSeconds: number;
  /** Commands Redis counted (inside functions too), INFO excepted. */
  commands: number;
  /** Script and function calls (FCALL, EVALSHA and their read-only forms). */
  scriptCalls: number;
  seconds: number;
  latency: LatencyHistogram;
}

const SCRIPT_COMMANDS = ['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro'];

/**
 * `inFlight` workers for `seconds`, each running `op` again once the last answered (closed loop).
 * `op` returns how many deliveries it made. Redis CPU is the redis-server's (INFO used_cpu_user +
 * used_cpu_sys), Node's this process's (process.cpuUsage: the load generator, the client library
 * and, for the spike's reads, the fold; the same generator for every system).
 */
export async function measureWindow(info: Redis, seconds: number, inFlight: number, op: (i: number) => Promise<number>): Promise<Window> {
  const before = await redisStats(info);
  const cpu = process.cpuUsage();
  const latency = new LatencyHistogram();
  const started = performance.now();
  const end = started + seconds * 1000;
  let next = 0;
  let ops = 0;
  let units = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        // Not `units += await …`: that reads `units` before the await and loses the other workers' additions.
        const delivered = await op(next++);
        units += delivered;
        latency.recordMs(performance.now() - t);
        ops += 1;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const after = await redisStats(info);
  const d = statsDelta(before, after);
  let commands = 0;
  for (const [name] of after.commands) if (name !== 'info') commands += d.command(name).calls;
  let scriptCalls = 0;
  for (const name of SCRIPT_COMMANDS) scriptCalls += d.command(name).calls;
  return { ops, units, redisCpuSeconds: d.cpuSeconds, nodeCpuSeconds: (used.user + used.system) / 1e6, commands, scriptCalls, seconds: elapsed, latency };
}

export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export function min(values: readonly number[]): number {
  return values.length === 0 ? NaN : Math.min(...values);
}
