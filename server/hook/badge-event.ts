import { type Static, Type } from '@sinclair/typebox';
import { Category, Id } from '../../protocol/schemas.js';
import type { UnreadSummary } from '../../protocol/types.js';

const Counts = {
  total: Type.Integer({ description: 'As `total` of GET /v1/users/:uid/unread.' }),
  mentions: Type.Integer({ description: 'As `mentions` of GET /v1/users/:uid/unread.' }),
  categories: Type.Record(Category, Type.Integer(), { description: '`total` split by category; categories at zero are left out.' }),
};

/** The badge: what GET /v1/users/:uid/unread reports as totals. */
const BadgeSchema = Type.Object(Counts, { additionalProperties: false });
export type Badge = Static<typeof BadgeSchema>;

/**
 * One badge event (PROTOCOL.md "Badge hook", docs/badge-hook.md, which prints this schema and a
 * test checks it is this one): the user's latest badge, the last one delivered before it and the
 * difference, a per-user sequence that only rises, and the idempotency key (the same event sent
 * again carries the same key).
 */
export const BadgeEventSchema = Type.Object(
  {
    type: Type.Literal('badge'),
    uid: Id,
    seq: Type.Integer({ minimum: 1, description: 'Rises with every new badge of this user: ignore an event whose seq is not above the last one applied.' }),
    key: Type.String({ description: 'Idempotency key `<uid>:<seq>` (also the Idempotency-Key header, and Nats-Msg-Id on JetStream).' }),
    at: Type.Integer({ description: 'When the event was made, ms since the Unix epoch.' }),
    badge: BadgeSchema,
    previous: Type.Union([BadgeSchema, Type.Null()], {
      description: 'The badge of the last event delivered for this user; null when none is remembered (30 days).',
    }),
    change: Type.Object(Counts, {
      additionalProperties: false,
      description: 'badge minus previous, per field (from zero when previous is null); negative when the badge dropped.',
    }),
  },
  { additionalProperties: false },
);
export type BadgeEvent = Static<typeof BadgeEventSchema>;

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
