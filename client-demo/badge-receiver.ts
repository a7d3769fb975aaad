import { RedpointError } from '../protocol/errors.js';
import { decode } from '../protocol/schemas.js';
import type { HttpRouter } from '../server/gateway/http.js';
import { type BadgeEvent, BadgeEventSchema } from '../server/hook/badge-event.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyBadgeRequest } from '../server/hook/signature.js';

/**
 * The badge hook's secret in dev mode (`npm start` points the hook at this receiver when no hook
 * is configured): published, like the dev API key, so it protects nothing outside a laptop.
 */
export const DEMO_BADGE_HOOK_SECRET = 'redpoint-demo-badge-hook-secret-not-for-production';
export const DEMO_BADGE_HOOK_PATH = '/demo/badge-hook';
const EVENTS_PATH = '/demo/badge-events';

/** Events kept per user (the newest), and users kept (the least recently delivered forgotten first). */
const KEPT_EVENTS = 5;
const MAX_USERS = 10_000;

export interface ReceivedBadgeEvent {
  event: BadgeEvent;
  /** When this receiver accepted it, ms since the Unix epoch. */
  receivedAt: number;
}

/**
 * A push service in miniature, in the dev entry's process only: the badge webhook's receiver
 * (`POST /demo/badge-hook`), which checks each request with the documented check
 * (server/hook/signature.ts's `verifyBadgeRequest`, over the bytes received), refuses a forged
 * or replayed one with 401, applies an event only if its seq is above the user's last (the
 * idempotency rule of PROTOCOL.md "Badge hook"), and keeps the last few per user; the demo page
 * reads them (`GET /demo/badge-events?uid=`) to show what a locked phone's badge would do. In
 * memory, per server thread (dev mode runs one; with WORKERS=2 a page may ask the other one).
 */
export function registerBadgeReceiver(router: HttpRouter, secret: string): string[] {
  const kept = new Map<string, ReceivedBadgeEvent[]>();

  router.route(
    'post',
    DEMO_BADGE_HOOK_PATH,
    async (ctx) => {
      const raw = ctx.rawBody?.toString('utf8') ?? '';
      const outcome = verifyBadgeRequest(secret, { signature: ctx.headers?.[SIGNATURE_HEADER], timestamp: ctx.headers?.[TIMESTAMP_HEADER] }, raw);
      if (outcome !== 'ok') throw new RedpointError('unauthorized', `badge hook request refused: ${outcome}`);
      const event = decode(BadgeEventSchema, ctx.body);
      const list = kept.get(event.uid) ?? [];
      // A retry or a duplicate (same or lower seq) is acknowledged and changes nothing.
      const fresh = (list.at(-1)?.event.seq ?? 0) < event.seq;
      if (fresh) {
        list.push({ event, receivedAt: Date.now() });
        kept.delete(event.uid);
        kept.set(event.uid, list.slice(-KEPT_EVENTS));
        for (const oldest of kept.keys()) {
          if (kept.size <= MAX_USERS) break;
          kept.delete(oldest);
        }
      }
      return { body: { kept: fresh } };
    },
    { body: true, keepRawBody: true, keepHeaders: [SIGNATURE_HEADER, TIMESTAMP_HEADER], name: 'demo' },
  );
  router.route(
    'get',
    EVENTS_PATH,
    async (ctx) => {
      const uid = ctx.query.get('uid');
      if (!uid) throw new RedpointError('invalid_request', 'uid is required: GET /demo/badge-events?uid=alice');
      return { body: { events: kept.get(uid) ?? [] } };
    },
    { name: 'demo' },
  );
  return [DEMO_BADGE_HOOK_PATH, EVENTS_PATH];
}
