import type { ConvState, ConvView, UnreadSummary } from './types.js';

/**
 * Derivations shared by server and client so that both compute unread and totals the same way.
 * Conversation ids and categories are keys here, and `__proto__`, `constructor` or `toString`
 * are valid ones: keyed records are read through own properties only and built without a prototype.
 */
export function effectiveLastSeq(state: ConvState, heads: Readonly<Record<string, number>>): number {
  if (!state.large) return state.lastSeq;
  return Math.max(state.lastSeq, Object.hasOwn(heads, state.conv) ? (heads[state.conv] ?? 0) : 0);
}

export function isVisible(state: ConvState, heads: Readonly<Record<string, number>>): boolean {
  return effectiveLastSeq(state, heads) > state.deletedSeq;
}

/** `null` when the conversation is hidden (deleted and no newer message). */
export function toView(state: ConvState, heads: Readonly<Record<string, number>>): ConvView | null {
  const lastSeq = effectiveLastSeq(state, heads);
  if (lastSeq <= state.deletedSeq) return null;
  return {
    conv: state.conv,
    lastSeq,
    readSeq: state.readSeq,
    unread: Math.max(0, lastSeq - state.readSeq),
    mentions: state.mentions,
    muted: state.muted,
    markedUnread: state.markedUnread,
    category: state.category,
  };
}

export function summarize(
  uid: string,
  epoch: string,
  version: number,
  states: Iterable<ConvState>,
  heads: Readonly<Record<string, number>>,
): UnreadSummary {
  const conversations: ConvView[] = [];
  const categories: Record<string, number> = Object.create(null) as Record<string, number>;
  let total = 0;
  let mentions = 0;
  for (const state of states) {
    const view = toView(state, heads);
    if (!view) continue;
    conversations.push(view);
    if (view.muted) continue;
    total += view.unread;
    mentions += view.mentions;
    if (view.unread > 0) categories[view.category] = (categories[view.category] ?? 0) + view.unread;
  }
  conversations.sort((a, b) => (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0));
  return { uid, epoch, version, total, mentions, categories, conversations };
}
