import { SignJWT } from 'jose';
import { RedpointError } from '../../protocol/errors.js';
import { ApiKeys, DEFAULT_KEY_NAME, type NamedApiKey } from './api-keys.js';
import { DEV_API_KEY } from './auth-config.js';
import { DEFAULT_KEY_SET_TIMING, type JwksSource, KeySet, type KeySetTiming } from './jwks.js';
import {
  DEFAULT_CLOCK_TOLERANCE_SECONDS,
  DEFAULT_MAX_TTL_SECONDS,
  SECRET_ALGORITHM,
  type TokenPolicy,
  UserTokenVerifier,
  type VerifiedToken,
} from './user-tokens.js';

export type { VerifiedToken } from './user-tokens.js';

export interface AuthOptions extends Partial<TokenPolicy> {
  /** Public keys of ES256/RS256 user tokens. */
  keySet?: KeySet;
}

/** The credentials settings of the configuration (config.ts Config has them): auth/ needs no import of config.ts. */
export interface AuthSettings {
  /** The API key named `default`: REDPOINT_API_KEY, or the published dev key in dev mode. */
  apiKey?: string | undefined;
  /** More API keys by name (REDPOINT_API_KEYS), accepted like `apiKey`; the name is logged. */
  apiKeys?: readonly NamedApiKey[] | undefined;
  /** HS256 secret of client JWTs (REDPOINT_JWT_SECRET, or the dev secret); unset: HS256 tokens are refused. */
  jwtSecret?: string | undefined;
  /** Public keys of ES256/RS256 client JWTs (REDPOINT_JWKS_URL / _FILE); `timing` is for tests. */
  jwks?: (JwksSource & { timing?: Partial<KeySetTiming> }) | undefined;
  jwtIssuer?: string | undefined;
  jwtAudience?: string | undefined;
  /** Default 7 days. */
  jwtMaxTtlSeconds?: number | undefined;
  /** Default 5 s; a live socket is closed 4003 this long after its token's `exp`. */
  jwtClockToleranceSeconds?: number | undefined;
}

/**
 * The credentials a server accepts: the message service's API keys (several, by name) and user
 * tokens (HS256 with a shared secret, and/or ES256/RS256 with a JWK Set); mints HS256 tokens
 * for `npm run token`, the dev page and tests.
 */
export class Authenticator {
  readonly apiKeys: ApiKeys;
  private readonly secret: Uint8Array | undefined;
  private readonly verifier: UserTokenVerifier;
  private readonly policy: TokenPolicy;
  private readonly keySet: KeySet | undefined;

  /** `apiKeys` as one string: that key, named `default`. `jwtSecret` undefined: HS256 tokens are refused. */
  constructor(jwtSecret: string | undefined, apiKeys: string | readonly NamedApiKey[], options: AuthOptions = {}) {
    this.apiKeys = new ApiKeys(typeof apiKeys === 'string' ? [{ name: DEFAULT_KEY_NAME, key: apiKeys }] : apiKeys);
    this.secret = jwtSecret === undefined ? undefined : new TextEncoder().encode(jwtSecret);
    this.policy = {
      maxTtlSeconds: options.maxTtlSeconds ?? DEFAULT_MAX_TTL_SECONDS,
      clockToleranceSeconds: options.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS,
      ...(options.issuer !== undefined ? { issuer: options.issuer } : {}),
      ...(options.audience !== undefined ? { audience: options.audience } : {}),
    };
    this.keySet = options.keySet;
    this.verifier = new UserTokenVerifier(this.secret, options.keySet, this.policy);
  }

  /** Everything a configuration names; `onKeySetError` hears of every failed JWK Set load. */
  static fromConfig(config: AuthSettings, onKeySetError?: (err: Error) => void): Authenticator {
    const keys: NamedApiKey[] = [...(config.apiKey !== undefined ? [{ name: DEFAULT_KEY_NAME, key: config.apiKey }] : []), ...(config.apiKeys ?? [])];
    const { jwks } = config;
    return new Authenticator(config.jwtSecret, keys, {
      ...(jwks ? { keySet: KeySet.from(jwks, { ...DEFAULT_KEY_SET_TIMING, ...jwks.timing }, onKeySetError) } : {}),
      ...(config.jwtMaxTtlSeconds !== undefined ? { maxTtlSeconds: config.jwtMaxTtlSeconds } : {}),
      ...(config.jwtClockToleranceSeconds !== undefined ? { clockToleranceSeconds: config.jwtClockToleranceSeconds } : {}),
      ...(config.jwtIssuer !== undefined ? { issuer: config.jwtIssuer } : {}),
      ...(config.jwtAudience !== undefined ? { audience: config.jwtAudience } : {}),
    });
  }

  get maxTtlSeconds(): number {
    return this.policy.maxTtlSeconds;
  }

  get clockToleranceSeconds(): number {
    return this.policy.clockToleranceSeconds;
  }

  /** Returns the user id; throws `unauthorized` / `token_expired` (or `unavailable` when the JWK Set cannot be loaded). */
  async verifyUserToken(token: string): Promise<string> {
    return (await this.verifier.verify(token)).uid;
  }

  /** As `verifyUserToken`, with the token's `exp` and the key that verified it (what a live socket is held to). */
  verifyUser(token: string): Promise<VerifiedToken> {
    return this.verifier.verify(token);
  }

  /**
   * As `verifyUser`, where only a user token is taken (`where`: "GET /v1/sync", "the WebSocket
   * hello"): the message service's key sent there is refused as the wrong credential rather than
   * "not a JWT". Compared with the API keys on the failure path only, not on every request.
   */
  async verifyUserOnly(token: string, where: string): Promise<VerifiedToken> {
    try {
      return await this.verifier.verify(token);
    } catch (err) {
      if (!this.isApiKey(token)) throw err;
      throw new RedpointError('unauthorized', `${where} needs a user token (JWT), not the API key: the stream is per user`, 'wrong_credential');
    }
  }

  /**
   * Hears the kids a JWK Set reload dropped (a retired or compromised key), so that sockets
   * authenticated with them can be closed. Returns the unsubscribe.
   */
  onKeysRemoved(listener: (kids: ReadonlySet<string>) => void): () => void {
    return this.keySet?.onKeysRemoved(listener) ?? (() => undefined);
  }

  /** The name of the API key `candidate` is, or null (constant time; see `ApiKeys.match`). */
  apiKeyName(candidate: string): string | null {
    return this.apiKeys.match(candidate);
  }

  isApiKey(candidate: string): boolean {
    return this.apiKeyName(candidate) !== null;
  }

  /**
   * Why `candidate`, which is none of the API keys, is refused where one is wanted (`route`, as
   * "POST /v1/messages"); `orToken`: the route takes a user token too. Never echoes the candidate.
   * Called on the failure path only: comparing with the published dev key gives nothing away.
   */
  apiKeyRefusal(candidate: string, route: string, orToken: boolean): RedpointError {
    if (candidate === DEV_API_KEY) {
      return new RedpointError(
        'unauthorized',
        `that is the published dev API key, accepted only by a server in dev mode (no credential variable set); use one of this server's keys (REDPOINT_API_KEY / REDPOINT_API_KEYS)`,
        'api_key',
      );
    }
    if (!orToken && looksLikeJwt(candidate)) {
      return new RedpointError('unauthorized', `${route} needs the API key (the message service's credential), not a user token`, 'wrong_credential');
    }
    return new RedpointError(
      'unauthorized',
      `${orToken ? 'the credential is neither' : 'the credential is not'} one of this server's API keys (REDPOINT_API_KEY / REDPOINT_API_KEYS)${orToken ? ' nor a JWT' : ''}: keys are compared whole, check for a key of another deployment or stray characters`,
      'api_key',
    );
  }

  /** An HS256 token for `uid`, with the configured issuer and audience. Needs the shared secret. */
  async mintUserToken(uid: string, ttlSeconds = 3600): Promise<string> {
    if (!this.secret) throw new RedpointError('internal', 'no REDPOINT_JWT_SECRET: this server cannot mint tokens');
    const jwt = new SignJWT({})
      .setProtectedHeader({ alg: SECRET_ALGORITHM })
      .setSubject(uid)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds);
    if (this.policy.issuer !== undefined) jwt.setIssuer(this.policy.issuer);
    if (this.policy.audience !== undefined) jwt.setAudience(this.policy.audience);
    return jwt.sign(this.secret);
  }
}

/** Three dot-separated parts: meant as a JWT (verified as one), not as an API key. */
export function looksLikeJwt(credential: string): boolean {
  return credential.split('.').length === 3;
}

/** Extracts the credential of an `Authorization: Bearer <x>` header, or null. */
export function bearer(header: string): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}
