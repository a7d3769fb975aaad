/**
 * The top bar's "push service" line: what the badge hook last told the app's push service about
 * this user (the dev receiver, client-demo/badge-receiver.ts, keeps it), so a person sees the
 * locked phone's badge drop after reading in another tab. Polled: the receiver is a plain route.
 */
import { pushBadgeText, type ReceivedBadge } from './push-badge-text.js';

const POLL_MS = 2_000;

export function setupPushBadge(uid: string, el: HTMLElement): void {
  let last: ReceivedBadge | undefined;
  const show = (): void => {
    el.textContent = pushBadgeText(last, Date.now());
    el.dataset.seq = String(last?.event.seq ?? 0);
    el.dataset.total = String(last?.event.badge.total ?? '');
  };
  const poll = async (): Promise<void> => {
    try {
      const res = await fetch(`/demo/badge-events?uid=${encodeURIComponent(uid)}`);
      if (res.ok) last = ((await res.json()) as { events: ReceivedBadge[] }).events.at(-1);
    } catch {
      // The server is away: the line keeps the last event, its age still moving.
    }
    show();
  };
  show();
  void poll();
  setInterval(() => void poll(), POLL_MS);
}
