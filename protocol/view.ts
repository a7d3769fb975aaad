import type { ConvState, ConvView, UnreadSummary } from './types.js';

/**
 * Derivations shared by server and client so that both compute unread and totals the same way.
 * Ids are keys of `heads` and `categories`: any id is valid, `__proto__` and `constructor`
 * included, so keyed lookups go through own properties only, and totals are summed in a Map.
 */
export function headOf(heads: Readonly<Record<string, number>>, conv: string): number {
  return Object.hasOwn(heads, conv) ? (heads[conv] ?? 0) : 0;
}

export function effectiveLastSeq(state: ConvState, heads: Readonly<Record<string, number>>): number {
  if (!state.large) return state.lastSeq;
  return Math.max(state.lastSeq, headOf(heads, state.conv));
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

export function summarize(uid: string, epoch: string, version: number, states: Iterable<ConvState>, heads: Readonly<Record<string, number>>): UnreadSummary {
  const conversations: ConvView[] = [];
  const categories = new Map<string, number>();
  let total = 0;
  let mentions = 0;
  for (const state of states) {
    const view = toView(state, heads);
    if (!view) continue;
    conversations.push(view);
    if (view.muted) continue;
    total += view.unread;
    mentions += view.mentions;
    if (view.unread > 0) categories.set(view.category, (categories.get(view.category) ?? 0) + view.unread);
  }
  conversations.sort((a, b) => (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0));
  return { uid, epoch, version, total, mentions, categories: Object.fromEntries(categories), conversations };
}
