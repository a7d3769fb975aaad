import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The badge webhook's signature (docs/badge-hook.md, PROTOCOL.md "Badge hook"): HMAC-SHA256 with
 * the shared secret over `<timestamp>.<raw body>`, hex, sent as `Redpoint-Signature: v1=<hex>`
 * beside `Redpoint-Timestamp: <Unix seconds>`. The timestamp is signed, so a replay of an old
 * request is refused by its age; a forged body by its signature. As Stripe and Svix do.
 */
export const SIGNATURE_HEADER = 'redpoint-signature';
export const TIMESTAMP_HEADER = 'redpoint-timestamp';
export const IDEMPOTENCY_HEADER = 'idempotency-key';
/** A receiver refuses a request whose timestamp is further than this from its clock (seconds). */
const DEFAULT_TOLERANCE_SECONDS = 300;

export function signBody(secret: string, timestamp: number, body: string): string {
  return `v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

export type VerifyOutcome = 'ok' | 'bad_signature' | 'stale_timestamp' | 'missing';

/**
 * The receiver's check, as docs/badge-hook.md shows it: the signature over the raw body (before
 * any JSON parsing), compared in constant time, and the timestamp within `toleranceSeconds` of
 * `nowSeconds`. The test suite runs this very function against forged and replayed requests.
 */
export function verifyBadgeRequest(
  secret: string,
  headers: { signature: string | undefined; timestamp: string | undefined },
  rawBody: string,
  nowSeconds: number = Math.floor(Date.now() / 1000),
  toleranceSeconds: number = DEFAULT_TOLERANCE_SECONDS,
): VerifyOutcome {
  const { signature, timestamp } = headers;
  if (!signature || !timestamp || !/^\d+$/.test(timestamp)) return 'missing';
  const expected = Buffer.from(signBody(secret, Number(timestamp), rawBody));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'bad_signature';
  if (Math.abs(nowSeconds - Number(timestamp)) > toleranceSeconds) return 'stale_timestamp';
  return 'ok';
}
