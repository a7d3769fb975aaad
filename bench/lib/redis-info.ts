import { Redis } from 'ioredis';

/** What the bench reads from a redis-server's INFO: memory, CPU, per-command cost. */
export interface RedisStats {
  usedMemory: number;
  /** used_cpu_user + used_cpu_sys, seconds (the whole server: main thread and background threads). */
  cpuSeconds: number;
  /** cmdstat_<name> → calls and total µs. */
  commands: Map<string, { calls: number; usec: number }>;
}

/** A plain connection to one redis-server, for INFO and MEMORY commands (never the engine's). */
export function statsConnection(url: string): Redis {
  const r = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: true });
  r.on('error', () => undefined);
  return r;
}

export async function redisStats(r: Redis): Promise<RedisStats> {
  const text = (await r.call('INFO', 'memory', 'cpu', 'commandstats')) as string;
  const field = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)\\r?$`, 'm').exec(text)?.[1] ?? NaN);
  const commands = new Map<string, { calls: number; usec: number }>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    commands.set(m[1] ?? '', { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return { usedMemory: field('used_memory'), cpuSeconds: field('used_cpu_user') + field('used_cpu_sys'), commands };
}

/** Differences between two readings: CPU seconds and per-command calls / µs. */
export function statsDelta(before: RedisStats, after: RedisStats): { cpuSeconds: number; command(name: string): { calls: number; usec: number } } {
  return {
    cpuSeconds: after.cpuSeconds - before.cpuSeconds,
    command(name) {
      const a = after.commands.get(name) ?? { calls: 0, usec: 0 };
      const b = before.commands.get(name) ?? { calls: 0, usec: 0 };
      return { calls: a.calls - b.calls, usec: a.usec - b.usec };
    },
  };
}

/** MEMORY STATS, flattened (`db.0` fields become `db.0.overhead.hashtable.main`, ...). */
export async function memoryStats(r: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const walk = (prefix: string, list: unknown): void => {
    if (!Array.isArray(list)) return;
    for (let i = 0; i + 1 < list.length; i += 2) {
      const name = `${prefix}${String(list[i])}`;
      const value: unknown = list[i + 1];
      if (Array.isArray(value)) walk(`${name}.`, value);
      else out.set(name, Number(value));
    }
  };
  walk('', await r.call('MEMORY', 'STATS'));
  return out;
}
