/** Times as a chat list shows them: "now", "5 min", "2 h" today, then "Yesterday", a weekday, a date. */

const MINUTE = 60_000;

const startOfDay = (t: number): number => {
  const d = new Date(t);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
};

export function timeAgo(at: number, now: number): string {
  const minutes = Math.floor((now - at) / MINUTE);
  if (minutes < 1) return 'now';
  if (minutes < 60) return `${minutes} min`;
  const days = Math.round((startOfDay(now) - startOfDay(at)) / 86_400_000);
  if (days <= 0) return `${Math.floor(minutes / 60)} h`;
  if (days === 1) return 'Yesterday';
  if (days < 7) return new Date(at).toLocaleDateString('en-GB', { weekday: 'short' });
  return new Date(at).toLocaleDateString('en-GB', { day: 'numeric', month: 'short' });
}

/** The exact time, for a tooltip and the messages' own line. */
export const clockTime = (at: number): string => new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

/** "last active 5 min ago", "last active yesterday": the open conversation's header. */
export function lastActive(at: number, now: number): string {
  const ago = timeAgo(at, now);
  if (ago === 'now') return 'active just now';
  if (/(min| h)$/.test(ago)) return `active ${ago} ago`;
  return `active ${ago === 'Yesterday' ? 'yesterday' : ago}`;
}
