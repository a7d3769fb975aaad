/** WebSocket close codes (4000-4999 are application codes). A client reconnects unless told not to. */
export const CLOSE_CODES = {
  going_away: { code: 1001, reconnect: true, reason: 'Server shutting down: reconnect (to another instance).' },
  service_restart: { code: 1012, reconnect: true, reason: 'Server restarting: reconnect with backoff.' },
  try_again_later: { code: 1013, reconnect: true, reason: 'The server cannot check the token now (its key set is not loaded): reconnect with backoff.' },
  hello_timeout: { code: 4001, reconnect: true, reason: 'No valid hello within the deadline.' },
  unauthorized: { code: 4002, reconnect: false, reason: 'The token in hello is missing, forged or for no valid user.' },
  token_expired: { code: 4003, reconnect: true, reason: 'The token expired: fetch a new one, then reconnect.' },
  protocol_error: { code: 4004, reconnect: false, reason: 'A frame before hello, a second hello, or repeated malformed frames.' },
  rate_limited: { code: 4008, reconnect: true, reason: 'Frames sent far above the rate limit; reconnect after backoff.' },
  too_many_connections: { code: 4009, reconnect: false, reason: 'A newer connection of the same user replaced this one (per-user limit).' },
  slow_consumer: { code: 4010, reconnect: true, reason: 'The client did not read its socket; reconnect and pull.' },
} as const;

export type CloseReason = keyof typeof CLOSE_CODES;
