import { compactVerify, decodeProtectedHeader, type JWTPayload, type JWTVerifyOptions, errors as joseErrors, jwtVerify } from 'jose';
import { type AuthCheck, RedpointError } from '../../protocol/errors.js';
import { ID_PATTERN, LIMITS } from '../../protocol/limits.js';
import { DEV_JWT_SECRET } from './auth-config.js';
import { type KeySet, KeySetUnavailable } from './jwks.js';

/** What a user token must satisfy beyond its signature. */
export interface TokenPolicy {
  /** Required `iss`, when set. */
  issuer?: string;
  /** Required `aud` (one of the token's audiences), when set. */
  audience?: string;
  /** The longest lifetime accepted: `exp` minus `iat` (or minus now, whichever is earlier). */
  maxTtlSeconds: number;
  /**
   * Seconds of clock difference allowed on `exp`, `nbf` and `iat`: an identity provider whose
   * clock runs a little ahead must not get its fresh tokens refused as "not yet valid".
   */
  clockToleranceSeconds: number;
}

/** What a verified user token says: whose it is, until when, and which key signed it. */
export interface VerifiedToken {
  uid: string;
  /** `exp`, in seconds since the epoch. */
  exp: number;
  /** The `kid` of the JWK Set key that verified it; undefined for HS256 (the shared secret). */
  kid: string | undefined;
}

export const DEFAULT_MAX_TTL_SECONDS = 7 * 24 * 3600;
export const DEFAULT_CLOCK_TOLERANCE_SECONDS = 5;
/** The algorithms verified with the public keys of a JWK Set. */
const PUBLIC_KEY_ALGORITHMS = ['ES256', 'RS256'] as const;
export const SECRET_ALGORITHM = 'HS256';

const UID_RE = new RegExp(ID_PATTERN);

/**
 * Verifies user tokens: HS256 with a shared secret, and/or ES256/RS256 with the public keys of a
 * JWK Set (selected by `kid`), as configured. The algorithm named in the token's header picks
 * the key material, and each branch pins its algorithms, so an HS256 token can never be checked
 * against a public key (the algorithm-confusion attack) nor a public-key token against the secret.
 */
export class UserTokenVerifier {
  constructor(
    private readonly secret: Uint8Array | undefined,
    private readonly keySet: KeySet | undefined,
    private readonly policy: TokenPolicy,
  ) {}

  /** Returns the user id (`sub`) and more; throws `unauthorized`, `token_expired` or `unavailable` (keys not loadable). */
  async verify(token: string): Promise<VerifiedToken> {
    const { payload, kid } = await this.verifySignatureAndClaims(token);
    const sub = payload.sub;
    if (typeof sub !== 'string' || sub.length > LIMITS.idMaxLength || !UID_RE.test(sub)) {
      throw refused('claims', `the token's sub is not a valid user id (1-${LIMITS.idMaxLength} characters of ${ID_PATTERN})`);
    }
    const exp = payload.exp as number; // required by jwtVerify below
    const now = Math.floor(Date.now() / 1000);
    const start = Math.min(typeof payload.iat === 'number' ? payload.iat : now, now);
    if (exp - start > this.policy.maxTtlSeconds) {
      throw refused('lifetime', `token lifetime exceeds the maximum of ${this.policy.maxTtlSeconds} s (exp - iat, REDPOINT_JWT_MAX_TTL_SECONDS)`);
    }
    return { uid: sub, exp, kid };
  }

  private async verifySignatureAndClaims(token: string): Promise<{ payload: JWTPayload; kid: string | undefined }> {
    let alg: string | undefined;
    let kid: string | undefined;
    try {
      const header = decodeProtectedHeader(token);
      alg = header.alg;
      kid = header.kid;
    } catch {
      throw refused('malformed', 'the token is not a JWT (three base64url parts, a JSON header and payload)');
    }
    try {
      if (alg === SECRET_ALGORITHM) {
        if (!this.secret) throw refused('algorithm', `${alg} tokens are not accepted: no REDPOINT_JWT_SECRET is configured (sign with a key of the JWK Set)`);
        return { payload: (await jwtVerify(token, this.secret, this.options([SECRET_ALGORITHM]))).payload, kid: undefined };
      }
      if ((PUBLIC_KEY_ALGORITHMS as readonly string[]).includes(alg ?? '')) {
        if (!this.keySet) throw refused('algorithm', `${alg} tokens are not accepted: no JWK Set is configured (REDPOINT_JWKS_URL / _FILE)`);
        return { payload: (await jwtVerify(token, this.keySet.getKey, this.options(PUBLIC_KEY_ALGORITHMS))).payload, kid };
      }
      throw refused('algorithm', `unsupported token algorithm ${JSON.stringify(alg ?? null)}: use HS256 (shared secret) or ES256 / RS256 (JWK Set)`);
    } catch (err) {
      throw await this.explain(err, token, alg, kid);
    }
  }

  /**
   * The failure as the client sees it, naming the check. A bad HS256 signature is tried once more
   * against the published dev secret (on the failure path only): a token minted by a dev server
   * is the commonest wrong secret, and saying so gives away nothing that is not public.
   */
  private async explain(err: unknown, token: string, alg: string | undefined, kid: string | undefined): Promise<RedpointError> {
    if (err instanceof joseErrors.JWSSignatureVerificationFailed) {
      if (alg !== SECRET_ALGORITHM) return refused('signature', `the signature does not verify with the JWK Set key ${JSON.stringify(kid ?? null)}`);
      const dev = this.secret !== undefined && !sameBytes(this.secret, DEV_SECRET_BYTES) && (await verifies(token, DEV_SECRET_BYTES));
      return refused(
        'signature',
        dev
          ? 'the token is signed with the published dev secret; this server verifies with its own REDPOINT_JWT_SECRET: mint tokens with that'
          : 'the signature does not verify with REDPOINT_JWT_SECRET (a token signed with another secret, or altered)',
      );
    }
    if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) {
      return refused('unknown_kid', `no key of the JWK Set has kid ${JSON.stringify(kid ?? null)}, even after reloading it`);
    }
    return toRedpointError(err);
  }

  private options(algorithms: readonly string[]): JWTVerifyOptions {
    return {
      algorithms: [...algorithms],
      requiredClaims: ['exp', 'sub'],
      clockTolerance: this.policy.clockToleranceSeconds,
      ...(this.policy.issuer !== undefined ? { issuer: this.policy.issuer } : {}),
      ...(this.policy.audience !== undefined ? { audience: this.policy.audience } : {}),
    };
  }
}

const DEV_SECRET_BYTES = new TextEncoder().encode(DEV_JWT_SECRET);

function refused(check: AuthCheck, message: string): RedpointError {
  return new RedpointError('unauthorized', message, check);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

async function verifies(token: string, secret: Uint8Array): Promise<boolean> {
  try {
    await compactVerify(token, secret, { algorithms: [SECRET_ALGORITHM] });
    return true;
  } catch {
    return false;
  }
}

/** The claim checks jose reports, by claim: the configured value they were held to is named, never a secret. */
const CLAIM_CHECKS: Readonly<Record<string, { check: AuthCheck; fix: string }>> = {
  iss: { check: 'issuer', fix: 'it must equal REDPOINT_JWT_ISSUER' },
  aud: { check: 'audience', fix: 'it must contain REDPOINT_JWT_AUDIENCE' },
  nbf: { check: 'not_yet_valid', fix: 'the token is not valid yet (nbf is in the future beyond the clock tolerance): check the issuing clock' },
};

function toRedpointError(err: unknown): RedpointError {
  if (err instanceof RedpointError) return err;
  if (err instanceof joseErrors.JWTExpired) return new RedpointError('token_expired', 'token expired (exp has passed): fetch a new token', 'expired');
  if (err instanceof KeySetUnavailable) return new RedpointError('unavailable', 'cannot load the token signing keys; retry');
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    const known = CLAIM_CHECKS[err.claim];
    if (known) return refused(known.check, `the token's ${err.claim} claim is rejected (${err.reason}): ${known.fix}`);
    return refused('claims', `the token's ${err.claim} claim is rejected (${err.reason}): sub must be a user id, exp a number of seconds`);
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed)
    return refused('algorithm', 'the token algorithm is not accepted: use HS256 (shared secret) or ES256 / RS256 (JWK Set)');
  if (err instanceof joseErrors.JWTInvalid || err instanceof joseErrors.JWSInvalid) {
    return refused('malformed', 'the token is not a JWT (three base64url parts, a JSON header and payload)');
  }
  return refused('malformed', 'the token cannot be verified');
}
