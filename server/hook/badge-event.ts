import type { UnreadSummary } from '../../protocol/types.js';

/** The badge: what GET /v1/users/:uid/unread reports as totals. */
export interface Badge {
  total: number;
  mentions: number;
  categories: Record<string, number>;
}

/**
 * One badge event (PROTOCOL.md "Badge hook", docs/badge-hook.md): the user's latest badge, the
 * last one delivered before it and the difference, a per-user sequence that only rises, and the
 * idempotency key (the same event sent again carries the same key).
 */
export interface BadgeEvent {
  type: 'badge';
  uid: string;
  seq: number;
  key: string;
  /** When the event was made (ms since the epoch). */
  at: number;
  badge: Badge;
  /** The badge of the last event delivered for this user, or null when none is remembered. */
  previous: Badge | null;
  /** badge − previous, per field (previous null: counted from zero). */
  change: Badge;
}

export function badgeOf(summary: Pick<UnreadSummary, 'total' | 'mentions' | 'categories'>): Badge {
  return { total: summary.total, mentions: summary.mentions, categories: { ...summary.categories } };
}

/** The badge's canonical text (categories sorted, zeros left out): equal badges, equal texts. It is what the store keeps as delivered. */
export function badgeText(badge: Badge): string {
  const categories = Object.fromEntries(
    Object.entries(badge.categories)
      .filter(([, n]) => n !== 0)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  return JSON.stringify({ total: badge.total, mentions: badge.mentions, categories });
}

export function parseBadge(text: string): Badge | null {
  try {
    const value = JSON.parse(text) as Badge;
    return typeof value.total === 'number' && typeof value.mentions === 'number' ? value : null;
  } catch {
    return null;
  }
}

export function badgeEvent(uid: string, seq: number, badge: Badge, previous: Badge | null, at: number): BadgeEvent {
  const before = previous ?? { total: 0, mentions: 0, categories: {} };
  const categories: Record<string, number> = {};
  for (const name of new Set([...Object.keys(badge.categories), ...Object.keys(before.categories)])) {
    const delta = (badge.categories[name] ?? 0) - (before.categories[name] ?? 0);
    if (delta !== 0) categories[name] = delta;
  }
  return {
    type: 'badge',
    uid,
    seq,
    key: `${uid}:${seq}`,
    at,
    badge,
    previous,
    change: { total: badge.total - before.total, mentions: badge.mentions - before.mentions, categories },
  };
}
