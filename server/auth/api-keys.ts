import { createHash, timingSafeEqual } from 'node:crypto';

/** An API key of the message service, with the name logs and metrics show instead of the key. */
export interface NamedApiKey {
  name: string;
  key: string;
}

/** The name REDPOINT_API_KEY (the single key) goes by. */
export const DEFAULT_KEY_NAME = 'default';
const API_KEY_MIN_LENGTH = 16;
const NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * The API keys the server accepts, several at once so that one can be rotated without downtime:
 * add the new key, move the callers, then drop the old one.
 */
export class ApiKeys {
  private readonly digests: ReadonlyArray<{ name: string; digest: Buffer }>;

  constructor(keys: readonly NamedApiKey[]) {
    this.digests = keys.map(({ name, key }) => ({ name, digest: digest(key) }));
  }

  get names(): string[] {
    return this.digests.map((d) => d.name);
  }

  /**
   * The name of the key `candidate` is, or null. Compares digests (so lengths do not leak) with
   * every key, never stopping at a match, so the time taken says nothing about which key matched.
   */
  match(candidate: string): string | null {
    const probe = digest(candidate);
    let found: string | null = null;
    for (const { name, digest: known } of this.digests) {
      if (timingSafeEqual(probe, known) && found === null) found = name;
    }
    return found;
  }
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * Parses `name:key,name:key` (REDPOINT_API_KEYS). The key is everything after the first colon,
 * so a key may contain colons but not commas. Throws naming the problem, never echoing a key.
 */
export function parseApiKeys(text: string): NamedApiKey[] {
  const keys: NamedApiKey[] = [];
  const entries = text.split(',').map((entry) => entry.trim());
  entries.forEach((entry, index) => {
    const colon = entry.indexOf(':');
    const where = `entry ${index + 1}`;
    if (colon < 0) throw new Error(`${where}: expected name:key`);
    const name = entry.slice(0, colon).trim();
    const key = entry.slice(colon + 1).trim();
    if (!NAME_RE.test(name)) throw new Error(`${where}: the name must be 1-64 characters of [A-Za-z0-9_.-] (got ${JSON.stringify(name)})`);
    if (key.length < API_KEY_MIN_LENGTH) throw new Error(`key "${name}": at least ${API_KEY_MIN_LENGTH} characters`);
    keys.push({ name, key });
  });
  return keys;
}

/** Refuses two keys with one name (which one did a log line mean?) or one key under two names. */
export function checkDistinct(keys: readonly NamedApiKey[]): void {
  const names = new Set<string>();
  const values = new Set<string>();
  for (const { name, key } of keys) {
    if (names.has(name))
      throw new Error(`the name "${name}" is used twice${name === DEFAULT_KEY_NAME ? ` (REDPOINT_API_KEY is named "${DEFAULT_KEY_NAME}")` : ''}`);
    if (values.has(key)) throw new Error(`key "${name}" is the same key as another one`);
    names.add(name);
    values.add(key);
  }
}
