import {
  countersOf,
  encodeUserCounters,
  USER_META_COUNTER_FIELDS,
  USER_META_COUNTERS,
  USER_META_PACKED,
  type UserCounterName,
  type UserCounters,
} from '../../server/engine/redis/user-meta.js';

/** What these helpers need of an ioredis client or cluster. */
export interface MetaClient {
  hmgetBuffer(key: string, ...fields: string[]): Promise<(Buffer | null)[]>;
  hgetall(key: string): Promise<Record<string, string>>;
  hset(key: string, field: string, value: string | Buffer): Promise<number>;
  hset(key: string, fields: Record<string, string>): Promise<number>;
  hdel(key: string, ...fields: string[]): Promise<number>;
}

/** The user's counters as its meta holds them (packed, or the text fields of before the packing); null: none. */
export async function readCounters(client: MetaClient, metaKey: string): Promise<UserCounters | null> {
  return countersOf(await client.hmgetBuffer(metaKey, ...USER_META_COUNTER_FIELDS));
}

/** One counter of the user, 0 when the meta holds none. */
export async function readCounter(client: MetaClient, metaKey: string, name: UserCounterName): Promise<number> {
  return (await readCounters(client, metaKey))?.[name] ?? 0;
}

/** Overwrites one counter in the packed field (a fault or a corruption the test plants). */
export async function setCounter(client: MetaClient, metaKey: string, name: UserCounterName, value: number): Promise<void> {
  const current = await readCounters(client, metaKey);
  if (!current) throw new Error(`${metaKey} holds no counters`);
  await client.hset(metaKey, USER_META_PACKED, encodeUserCounters({ ...current, [name]: value }));
}

/** Every category's stored total that is not 0: the default's counter and the k:<category> fields. */
export async function categoryTotals(client: MetaClient, metaKey: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const defaultTotal = await readCounter(client, metaKey, 'defaultTotal');
  if (defaultTotal !== 0) out.set('default', defaultTotal);
  for (const [field, value] of Object.entries(await client.hgetall(metaKey))) {
    if (field.startsWith('k:') && field !== 'k:default') out.set(field.slice(2), Number(value));
  }
  return out;
}

/**
 * Rewrites a packed meta as a meta from before the packing holds it (each counter its own text
 * field; the default category's total only when not 0). Returns whether it was packed.
 */
export async function unpackToLegacy(client: MetaClient, metaKey: string): Promise<boolean> {
  const [packed] = await client.hmgetBuffer(metaKey, USER_META_PACKED);
  if (!packed) return false;
  const counters = countersOf([packed]);
  if (!counters) return false;
  const fields: Record<string, string> = {};
  for (const c of USER_META_COUNTERS) {
    if (c.legacy !== 'k:default' || counters[c.name] !== 0) fields[c.legacy] = String(counters[c.name]);
  }
  await client.hset(metaKey, fields);
  await client.hdel(metaKey, USER_META_PACKED);
  return true;
}
