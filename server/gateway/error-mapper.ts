import type { Logger } from 'pino';
import { ERROR_CODES, RedpointError } from '../../protocol/errors.js';
import { StoreError } from '../engine/store-errors.js';
import type { Metrics } from '../metrics/metrics.js';

/** What the mapper needs to know about the failed request or frame. */
export interface FailedCall {
  /** The call changes state (ingest, read, settings, membership): an unknown outcome matters. */
  write: boolean;
  transport: 'http' | 'ws';
  log: Logger;
  metrics: Metrics;
  /** Added to the log line (request id, connection id, url). */
  fields?: Record<string, unknown>;
}

/**
 * The one mapping from what a call failed with to the wire error, for HTTP and WebSocket alike.
 * Typed store errors keep their meaning: `unavailable` says nothing was applied, `outcome_unknown`
 * (writes only) says the change may have been applied and must be retried. A read has no outcome
 * to report, so its store errors are all `unavailable`. Anything unexpected is `internal`.
 */
function toWireError(err: unknown, write: boolean): RedpointError {
  if (err instanceof RedpointError) return err;
  if (err instanceof StoreError) {
    if (write && err.outcome === 'unknown') {
      return new RedpointError('outcome_unknown', `the store did not confirm the change (${err.kind}); it may or may not be applied: retry it`);
    }
    return new RedpointError('unavailable', `store unavailable (${err.kind}); nothing was applied: retry`);
  }
  return new RedpointError('internal', 'internal error');
}

/**
 * toWireError, counted (`redpoint_errors_total`, and `redpoint_unavailable_replies_total` for the
 * 503s) and logged: unexpected errors at error level with their stack; store errors at debug only,
 * since an outage is reported once by StoreHealth, not once per request.
 */
export function wireError(err: unknown, call: FailedCall): RedpointError {
  const e = toWireError(err, call.write);
  call.metrics.errors.inc({ code: e.code });
  if (ERROR_CODES[e.code].status === 503) call.metrics.unavailableReplies.inc({ code: e.code, transport: call.transport });
  if (e.code === 'internal') call.log.error({ event: 'request_failed', err, transport: call.transport, ...call.fields }, 'request failed');
  else if (err instanceof StoreError) {
    call.log.debug({ event: 'request_store_error', code: e.code, kind: err.kind, transport: call.transport, ...call.fields }, `request failed: ${err.message}`);
  }
  return e;
}
