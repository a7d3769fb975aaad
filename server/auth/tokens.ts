import { timingSafeEqual, createHash } from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';
import { LIMITS } from '../../protocol/limits.js';
import { RedpointError } from '../../protocol/errors.js';

const ALGORITHM = 'HS256';
const UID_RE = /^[A-Za-z0-9_.:@-]+$/;

/** Verifies client JWTs (HS256, user id in `sub`, `exp` required) and the message service's API key. */
export class Authenticator {
  private readonly secret: Uint8Array;
  private readonly apiKeyDigest: Buffer;

  constructor(jwtSecret: string, apiKey: string) {
    this.secret = new TextEncoder().encode(jwtSecret);
    this.apiKeyDigest = digest(apiKey);
  }

  /** Returns the user id; throws `unauthorized` / `token_expired`. */
  async verifyUserToken(token: string): Promise<string> {
    try {
      const { payload } = await jwtVerify(token, this.secret, { algorithms: [ALGORITHM], requiredClaims: ['exp', 'sub'] });
      const sub = payload.sub;
      if (typeof sub !== 'string' || sub.length > LIMITS.idMaxLength || !UID_RE.test(sub)) {
        throw new RedpointError('unauthorized', 'token subject is not a valid user id');
      }
      return sub;
    } catch (err) {
      if (err instanceof RedpointError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw new RedpointError('token_expired', 'token expired');
      throw new RedpointError('unauthorized', 'invalid token');
    }
  }

  /** Constant-time comparison (of digests, so lengths do not leak either). */
  isApiKey(candidate: string): boolean {
    return timingSafeEqual(digest(candidate), this.apiKeyDigest);
  }

  async mintUserToken(uid: string, ttlSeconds = 3600): Promise<string> {
    return new SignJWT({})
      .setProtectedHeader({ alg: ALGORITHM })
      .setSubject(uid)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
      .sign(this.secret);
  }
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Extracts the credential of an `Authorization: Bearer <x>` header, or null. */
export function bearer(header: string): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}
