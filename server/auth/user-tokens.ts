import { decodeProtectedHeader, type JWTPayload, type JWTVerifyOptions, errors as joseErrors, jwtVerify } from 'jose';
import { RedpointError } from '../../protocol/errors.js';
import { ID_PATTERN, LIMITS } from '../../protocol/limits.js';
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
      throw new RedpointError('unauthorized', 'token subject is not a valid user id');
    }
    const exp = payload.exp as number; // required by jwtVerify below
    const now = Math.floor(Date.now() / 1000);
    const start = Math.min(typeof payload.iat === 'number' ? payload.iat : now, now);
    if (exp - start > this.policy.maxTtlSeconds) {
      throw new RedpointError('unauthorized', `token lifetime exceeds the maximum of ${this.policy.maxTtlSeconds} s`);
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
      throw new RedpointError('unauthorized', 'invalid token');
    }
    try {
      if (alg === SECRET_ALGORITHM) {
        if (!this.secret) throw new RedpointError('unauthorized', `${alg} tokens are not accepted (no shared secret configured)`);
        return { payload: (await jwtVerify(token, this.secret, this.options([SECRET_ALGORITHM]))).payload, kid: undefined };
      }
      if ((PUBLIC_KEY_ALGORITHMS as readonly string[]).includes(alg ?? '')) {
        if (!this.keySet) throw new RedpointError('unauthorized', `${alg} tokens are not accepted (no JWK Set configured)`);
        return { payload: (await jwtVerify(token, this.keySet.getKey, this.options(PUBLIC_KEY_ALGORITHMS))).payload, kid };
      }
      throw new RedpointError('unauthorized', `unsupported token algorithm ${JSON.stringify(alg ?? null)}`);
    } catch (err) {
      throw toRedpointError(err);
    }
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

function toRedpointError(err: unknown): RedpointError {
  if (err instanceof RedpointError) return err;
  if (err instanceof joseErrors.JWTExpired) return new RedpointError('token_expired', 'token expired');
  if (err instanceof KeySetUnavailable) return new RedpointError('unavailable', 'cannot load the token signing keys; retry');
  // The claim's name helps whoever wires up an identity provider; it says nothing secret.
  if (err instanceof joseErrors.JWTClaimValidationFailed)
    return new RedpointError('unauthorized', `invalid token: ${err.claim} claim rejected (${err.reason})`);
  if (err instanceof joseErrors.JWKSNoMatchingKey) return new RedpointError('unauthorized', 'invalid token: no known key matches its kid');
  return new RedpointError('unauthorized', 'invalid token');
}
