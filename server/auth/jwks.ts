import { readFile } from 'node:fs/promises';
import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey, errors as joseErrors } from 'jose';

/** Where the public keys of user tokens come from: an identity provider's JWKS URL, or a file. */
export type JwksSource = { url: string } | { file: string };

export interface KeySetTiming {
  /** After a load, a token naming an unknown `kid` reloads only once this long has passed. */
  cooldownMs: number;
  /** Keys older than this are reloaded in the background (the old ones serve meanwhile). */
  maxAgeMs: number;
  /** A failed load is retried no sooner than this. */
  retryMs: number;
  /** A JWKS URL that does not answer within this fails the load. */
  timeoutMs: number;
}

export const DEFAULT_KEY_SET_TIMING: KeySetTiming = { cooldownMs: 30_000, maxAgeMs: 10 * 60_000, retryMs: 2_000, timeoutMs: 5_000 };

/** The keys could not be loaded: the token may be fine, the server cannot tell (503, retry). */
export class KeySetUnavailable extends Error {
  override name = 'KeySetUnavailable';
}

/** Members of a JWK that only private or symmetric keys have. */
const SECRET_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/**
 * Checks that `value` is a JWK Set of public EC or RSA keys; throws naming the problem. A private
 * or symmetric key in it is refused: Redpoint verifies, it never signs with these.
 */
export function checkJwks(value: unknown): JSONWebKeySet {
  if (typeof value !== 'object' || value === null || !Array.isArray((value as { keys?: unknown }).keys)) {
    throw new Error('not a JWK Set (expected {"keys": [...]})');
  }
  const keys = (value as { keys: unknown[] }).keys;
  if (keys.length === 0) throw new Error('the JWK Set has no keys');
  keys.forEach((key, index) => {
    const where = `key ${index + 1}${typeof key === 'object' && key !== null && 'kid' in key ? ` (kid ${JSON.stringify((key as { kid: unknown }).kid)})` : ''}`;
    if (typeof key !== 'object' || key === null) throw new Error(`${where}: not an object`);
    const kty = (key as { kty?: unknown }).kty;
    if (kty !== 'EC' && kty !== 'RSA') throw new Error(`${where}: kty must be EC or RSA (ES256 / RS256), got ${JSON.stringify(kty)}`);
    const secret = SECRET_MEMBERS.find((member) => member in key);
    if (secret) throw new Error(`${where}: holds private key material ("${secret}"); give Redpoint public keys only`);
  });
  createLocalJWKSet(value as JSONWebKeySet); // jose's own shape checks
  return value as JSONWebKeySet;
}

/** Loads the JWK Set of a source, checked. */
function loaderOf(source: JwksSource, timing: KeySetTiming): () => Promise<JSONWebKeySet> {
  if ('file' in source) return async () => checkJwks(JSON.parse(await readFile(source.file, 'utf8')));
  return async () => {
    const response = await fetch(source.url, {
      headers: { accept: 'application/json, application/jwk-set+json' },
      // A redirect could lead anywhere: the configured URL is the one trusted.
      redirect: 'error',
      signal: AbortSignal.timeout(timing.timeoutMs),
    });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    return checkJwks(await response.json());
  };
}

/**
 * The public keys user tokens are verified with, picked by `kid` (and algorithm) with jose's
 * local key set, reloaded so that keys can rotate: a token naming a `kid` the set lacks reloads
 * it (at most once per cooldown, so made-up kids cannot hammer the identity provider), and keys
 * older than `maxAgeMs` reload in the background. A failed reload keeps the keys it had: an
 * identity provider that is down does not lock out tokens signed with keys already known.
 */
export class KeySet {
  private keys: ReturnType<typeof createLocalJWKSet> | undefined;
  private loadedAt = Number.NEGATIVE_INFINITY;
  private failedAt = Number.NEGATIVE_INFINITY;
  private lastError: string | undefined;
  private loading: Promise<void> | undefined;
  private kids: ReadonlySet<string> = new Set();
  private readonly removedListeners = new Set<(kids: ReadonlySet<string>) => void>();

  constructor(
    private readonly load: () => Promise<JSONWebKeySet>,
    /** For messages: the URL or file. */
    readonly origin: string,
    private readonly timing: KeySetTiming = DEFAULT_KEY_SET_TIMING,
    /** Told about every failed load (the server logs it). */
    private readonly onError?: (err: Error) => void,
  ) {}

  static from(source: JwksSource, timing: KeySetTiming = DEFAULT_KEY_SET_TIMING, onError?: (err: Error) => void): KeySet {
    return new KeySet(loaderOf(source, timing), 'url' in source ? source.url : source.file, timing, onError);
  }

  /** For jose's `jwtVerify`. Throws `KeySetUnavailable` when no keys could be loaded. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    const now = Date.now();
    if (!this.keys) {
      if (!this.retryTooSoon(now)) await this.reload();
    } else if (now - this.loadedAt > this.timing.maxAgeMs && !this.retryTooSoon(now)) {
      this.reload().catch(() => undefined); // reported through onError; the current keys serve meanwhile
    }
    const keys = this.keys;
    if (!keys) throw new KeySetUnavailable(`no token signing keys loaded from ${this.origin}: ${this.lastError ?? 'unknown error'}`);
    try {
      return await keys(header, token);
    } catch (err) {
      if (!(err instanceof joseErrors.JWKSNoMatchingKey)) throw err;
      // The last reload failed and the next may not be tried yet: the kid may be a new key the
      // server cannot fetch now, so it cannot tell (503), rather than "no such key" (401).
      if (this.retryTooSoon(Date.now())) {
        throw new KeySetUnavailable(`cannot reload the token signing keys from ${this.origin}: ${this.lastError ?? 'unknown error'}`);
      }
      if (Date.now() - this.loadedAt < this.timing.cooldownMs) throw err;
      await this.reload();
      if (!this.keys || this.keys === keys)
        throw new KeySetUnavailable(`cannot reload the token signing keys from ${this.origin}: ${this.lastError ?? 'unknown error'}`);
      return this.keys(header, token);
    }
  };

  /** Only while the last load failed: a success since clears the back-off. */
  private retryTooSoon(now: number): boolean {
    return this.failedAt > this.loadedAt && now - this.failedAt < this.timing.retryMs;
  }

  onKeysRemoved(listener: (kids: ReadonlySet<string>) => void): () => void {
    this.removedListeners.add(listener);
    return () => this.removedListeners.delete(listener);
  }

  /** One load at a time; concurrent callers share it. Never rejects: failures are recorded. */
  private reload(): Promise<void> {
    this.loading ??= (async () => {
      try {
        const jwks = await this.load();
        this.keys = createLocalJWKSet(jwks);
        this.loadedAt = Date.now();
        this.lastError = undefined;
        const kids = new Set(jwks.keys.flatMap((k) => (typeof k.kid === 'string' ? [k.kid] : [])));
        const removed = new Set([...this.kids].filter((kid) => !kids.has(kid)));
        this.kids = kids;
        if (removed.size > 0) for (const listener of this.removedListeners) listener(removed);
      } catch (err) {
        this.failedAt = Date.now();
        const error = err instanceof Error ? err : new Error(String(err));
        this.lastError = error.message;
        this.onError?.(error);
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }
}
