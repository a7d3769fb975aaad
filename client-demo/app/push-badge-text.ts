/** The text of the top bar's "push service" line (push-badge.ts); no DOM, so unit-tested under Node. */

/** What the page needs of one received event (GET /demo/badge-events?uid=). */
export interface ReceivedBadge {
  event: { seq: number; badge: { total: number }; previous: { total: number } | null };
  receivedAt: number;
}

/** "push service: badge 3 → 1, 12 s ago"; before any event, what the hook is waiting for. */
export function pushBadgeText(last: ReceivedBadge | undefined, now: number): string {
  if (!last) return 'push service: no badge event yet';
  const { badge, previous } = last.event;
  const change = previous ? `${previous.total} → ${badge.total}` : `${badge.total}`;
  const seconds = Math.max(0, Math.round((now - last.receivedAt) / 1000));
  const ago = seconds < 60 ? `${seconds} s ago` : `${Math.floor(seconds / 60)} min ago`;
  return `push service: badge ${change}, ${ago}`;
}
