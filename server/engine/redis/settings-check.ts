import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redisAddress } from './watch-redis.js';

/** What Redpoint needs to know of one Redis server's configuration (undefined: could not be read). */
export interface RedisSettings {
  node: string;
  /** appendonly yes */
  aof: boolean | undefined;
  /** At least one RDB save point. */
  rdb: boolean | undefined;
  maxmemoryPolicy: string | undefined;
}

/** A finding about the settings: logged as a warning, or a refusal to start. */
interface Finding {
  event: 'redis_persistence_off' | 'redis_persistence_rdb_only' | 'redis_eviction_allowed' | 'redis_settings_unchecked';
  node: string;
  message: string;
}

export interface Verdict {
  warnings: Finding[];
  /** Set when Redpoint must not start on these servers. */
  refusal?: string;
}

/**
 * Reads the settings with CONFIG GET; where CONFIG is not allowed (managed Redis services rename
 * or deny it), falls back to INFO, which shows AOF and the eviction policy but not RDB save points.
 */
async function readRedisSettings(node: Redis, name: string): Promise<RedisSettings> {
  try {
    const get = async (param: string): Promise<string | undefined> => {
      const reply = (await node.call('CONFIG', 'GET', param)) as string[];
      return reply[1];
    };
    const [aof, save, policy] = await Promise.all([get('appendonly'), get('save'), get('maxmemory-policy')]);
    return {
      node: name,
      aof: aof === undefined ? undefined : aof === 'yes',
      rdb: save === undefined ? undefined : save.trim() !== '',
      maxmemoryPolicy: policy,
    };
  } catch {
    const info = `${await node.info('persistence').catch(() => '')}\n${await node.info('memory').catch(() => '')}`;
    const field = (key: string): string | undefined => new RegExp(`^${key}:(.*?)\\r?$`, 'm').exec(info)?.[1];
    const aof = field('aof_enabled');
    return { node: name, aof: aof === undefined ? undefined : aof === '1', rdb: undefined, maxmemoryPolicy: field('maxmemory_policy') };
  }
}

/**
 * What the settings of every master mean for Redpoint's counts. Under the durable tier
 * (`durable`), a Redis that loses its data loses only what the drainer has not yet written to
 * PostgreSQL: the rest is restored on touch.
 */
export function judgeRedisSettings(all: readonly RedisSettings[], allowEviction: boolean, durable = false): Verdict {
  const restartLoses = durable
    ? 'a Redis restart loses the changes the durable tier has not yet written to PostgreSQL (up to PERSIST_INTERVAL_MS of them; the rest is restored on touch)'
    : 'a Redis restart resets every count to zero';
  const crashLoses = durable
    ? 'a crash loses the writes since the last snapshot that the durable tier has not yet written to PostgreSQL'
    : 'a crash loses every write since the last snapshot';
  const warnings: Finding[] = [];
  const evicting: string[] = [];
  for (const s of all) {
    if (s.aof === false && s.rdb === false) {
      warnings.push({
        event: 'redis_persistence_off',
        node: s.node,
        message: `Redis ${s.node} has no persistence (appendonly no, no save points): ${restartLoses}. Set appendonly yes and appendfsync everysec (docs/operations.md, Production checklist).`,
      });
    } else if (s.aof === false && s.rdb === true) {
      warnings.push({
        event: 'redis_persistence_rdb_only',
        node: s.node,
        message: `Redis ${s.node} persists with RDB snapshots only: ${crashLoses}. Set appendonly yes and appendfsync everysec.`,
      });
    } else if (s.aof === undefined) {
      warnings.push({
        event: 'redis_settings_unchecked',
        node: s.node,
        message: `could not read the persistence settings of Redis ${s.node}: make sure AOF is on (appendonly yes).`,
      });
    }
    if (s.maxmemoryPolicy === undefined) {
      warnings.push({
        event: 'redis_settings_unchecked',
        node: s.node,
        message: `could not read maxmemory-policy of Redis ${s.node}: make sure it is noeviction.`,
      });
    } else if (s.maxmemoryPolicy !== 'noeviction') {
      evicting.push(`${s.node} (${s.maxmemoryPolicy})`);
      if (allowEviction) {
        warnings.push({
          event: 'redis_eviction_allowed',
          node: s.node,
          message: `Redis ${s.node} has maxmemory-policy ${s.maxmemoryPolicy}: evicted keys silently corrupt counts. Starting anyway because REDIS_ALLOW_EVICTION is set.`,
        });
      }
    }
  }
  if (evicting.length === 0 || allowEviction) return { warnings };
  return {
    warnings,
    refusal:
      `Redis may evict keys: maxmemory-policy is not noeviction on ${evicting.join(', ')}. Evicted keys silently corrupt counts. ` +
      'Set maxmemory-policy noeviction (a full Redis then refuses writes, answered 503), or set REDIS_ALLOW_EVICTION=true to start anyway.',
  };
}

/** What the check knows of the deployment, so that its findings are true of it. */
export interface SettingsContext {
  /** How a master is named in a finding (default: its connection's host:port). */
  nameOf?: (node: Redis) => string;
  /** The durable tier is on (DATABASE_URL). */
  durable?: boolean;
}

/** Reads every master's settings, logs the warnings, and throws when Redpoint must not start. */
export async function enforceRedisSettings(masters: readonly Redis[], allowEviction: boolean, log: Logger, context: SettingsContext = {}): Promise<void> {
  const nameOf = context.nameOf ?? redisAddress;
  const verdict = judgeRedisSettings(await Promise.all(masters.map((node) => readRedisSettings(node, nameOf(node)))), allowEviction, context.durable);
  for (const w of verdict.warnings) log.warn({ event: w.event, node: w.node }, w.message);
  if (verdict.refusal) throw new Error(verdict.refusal);
}
