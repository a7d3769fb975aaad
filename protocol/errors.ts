/**
 * Every error the server answers with. The code is the stable contract; the message is for people.
 * HTTP status per code is part of the contract too (see PROTOCOL.md).
 */
export const ERROR_CODES = {
  bad_json: { status: 400, reason: 'The body is not valid JSON / MessagePack.' },
  invalid_request: { status: 400, reason: 'The body or query does not match the schema (types, ranges, lengths).' },
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
  seq_jump: { status: 422, reason: "A seq jumps further above its conversation's head than MAX_SEQ_JUMP allows (seqs are dense)." },
  conversation_limit: {
    status: 422,
    reason: 'A membership change would put a user in more conversations than MAX_CONVERSATIONS_PER_USER allows; those users were not added.',
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

/** An error meant for the client: carries its code, safe to show. Anything else is `internal`. */
export class RedpointError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = 'RedpointError';
    this.code = code;
  }
  get status(): number {
    return ERROR_CODES[this.code].status;
  }
}
