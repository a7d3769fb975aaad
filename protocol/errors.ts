/**
 * Every error the server answers with. The code is the stable contract; the message is for people.
 * HTTP status per code is part of the contract too (see PROTOCOL.md).
 */
export const ERROR_CODES = {
  bad_json: { status: 400, reason: 'The body is not valid JSON / MessagePack.' },
  invalid_request: { status: 400, reason: 'The body or query does not match the schema (types, ranges, lengths).' },
  bad_framing: {
    status: 400,
    reason: "The request's length is ambiguous (a repeated Content-Length or Transfer-Encoding, a coding besides chunked); the connection is closed.",
  },
  unauthorized: { status: 401, reason: 'No credentials, or credentials that do not verify (forged, wrong key).' },
  token_expired: { status: 401, reason: 'The JWT has expired; fetch a new one.' },
  forbidden: { status: 403, reason: "The credentials are valid but do not allow this (another user's data)." },
  not_found: { status: 404, reason: 'No such endpoint.' },
  not_a_member: {
    status: 403,
    reason: 'The conversation exists but the user is not a member of it; the message service adds members with PUT /v1/conversations/{conv}/members.',
  },
  unknown_conversation: { status: 404, reason: 'The conversation does not exist; the message service creates it with PUT /v1/conversations/{conv}/members.' },
  method_not_allowed: { status: 405, reason: 'The endpoint exists but not with this method.' },
  payload_too_large: { status: 413, reason: 'The body exceeds the size limit.' },
  unsupported_media_type: { status: 415, reason: 'Send application/json (or application/msgpack where accepted).' },
  seq_jump: { status: 422, reason: "A seq jumps further above its conversation's head (0 for a new one) than MAX_SEQ_JUMP allows (seqs are dense)." },
  conversation_limit: {
    status: 422,
    reason:
      'A membership change would put a user in more conversations than MAX_CONVERSATIONS_PER_USER allows; those users were not added, the rest of the change was.',
  },
  limit_exceeded: {
    status: 422,
    reason:
      'The request would exceed a per-conversation limit (LIMITS.topicsPerConversation topics, LIMITS.threadsFollowedPerConversation threads followed per user); nothing of it was applied.',
  },
  rate_limited: { status: 429, reason: 'Too many requests or frames; slow down.' },
  internal: { status: 500, reason: 'An unexpected server error; the request may be retried.' },
  unavailable: { status: 503, reason: 'The store is unreachable, stuck, or the server is shutting down; nothing was applied. Retry after Retry-After.' },
  outcome_unknown: {
    status: 503,
    reason: 'The change reached the store but no trustworthy answer came back: it may or may not be applied. Retry it (every write is idempotent).',
  },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * Which check a credential failed, sent as `check` with `unauthorized` and `token_expired` (HTTP
 * body and WebSocket `error` frame): what to fix, never the credential nor a secret.
 */
export const AUTH_CHECKS = {
  missing: 'No `Authorization: Bearer` credential (over WebSocket: no token in hello).',
  wrong_credential: 'The API key where a user token is needed, or a user token where the API key is.',
  api_key: "Not one of this server's API keys (REDPOINT_API_KEY / REDPOINT_API_KEYS); the published dev key works in dev mode only.",
  malformed: 'Not a JWT: three base64url parts, a JSON header and payload.',
  algorithm: "The token's `alg` is not one this server verifies: HS256 with REDPOINT_JWT_SECRET, ES256 / RS256 with the JWK Set.",
  signature: 'The signature does not verify with REDPOINT_JWT_SECRET, or with the JWK Set key its `kid` names.',
  unknown_kid: "No key of the JWK Set has the token's `kid`, even after reloading the set.",
  issuer: '`iss` is not REDPOINT_JWT_ISSUER.',
  audience: '`aud` does not contain REDPOINT_JWT_AUDIENCE.',
  expired: '`exp` has passed (beyond the clock tolerance): fetch a new token.',
  not_yet_valid: '`nbf` is in the future (beyond the clock tolerance): check the issuing clock.',
  claims: 'A required claim is missing or invalid: `sub` a user id, `exp` a number of seconds.',
  lifetime: '`exp` minus `iat` exceeds REDPOINT_JWT_MAX_TTL_SECONDS.',
} as const;

export type AuthCheck = keyof typeof AUTH_CHECKS;

/** An error meant for the client: carries its code, safe to show. Anything else is `internal`. */
export class RedpointError extends Error {
  readonly code: ErrorCode;
  /** With `unauthorized` / `token_expired`: the credential check that failed. */
  readonly check: AuthCheck | undefined;
  constructor(code: ErrorCode, message: string, check?: AuthCheck) {
    super(message);
    this.name = 'RedpointError';
    this.code = code;
    this.check = check;
  }
  get status(): number {
    return ERROR_CODES[this.code].status;
  }
}
