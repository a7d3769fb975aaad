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
    ...(state.level !== undefined ? { level: state.level } : {}),
    ...(state.at !== undefined ? { at: state.at } : {}),
  };
}

/** Badge totals as they are summed: `categories` in a Map (see above). */
export interface Totals {
  total: number;
  mentions: number;
  categories: Map<string, number>;
}

/**
 * Adds one visible conversation's share of the badge (rules.ts contribution): none when muted
 * (level 'none'); for level 'mentions' only its mentions, each one unread of the badge.
 */
export function addToTotals(totals: Totals, view: ConvView): void {
  if (view.muted) return;
  const unread = view.level === 'mentions' ? view.mentions : view.unread;
  totals.total += unread;
  totals.mentions += view.mentions;
  if (unread > 0) totals.categories.set(view.category, (totals.categories.get(view.category) ?? 0) + unread);
}

/** The visible conversations, in the order of `states`. */
function visibleViews(states: Iterable<ConvState>, heads: Readonly<Record<string, number>>): ConvView[] {
  const views: ConvView[] = [];
  for (const state of states) {
    const view = toView(state, heads);
    if (view) views.push(view);
  }
  return views;
}

function byConv(views: ConvView[]): ConvView[] {
  return views.sort((a, b) => (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0));
}

/** The visible conversations, sorted by id: the list of an unread summary. */
export function conversationViews(states: Iterable<ConvState>, heads: Readonly<Record<string, number>>): ConvView[] {
  return byConv(visibleViews(states, heads));
}

export function summarize(uid: string, epoch: string, version: number, states: Iterable<ConvState>, heads: Readonly<Record<string, number>>): UnreadSummary {
  const conversations = visibleViews(states, heads);
  const totals: Totals = { total: 0, mentions: 0, categories: new Map() };
  for (const view of conversations) addToTotals(totals, view);
  // Object.fromEntries defines own properties: a category named `__proto__` stays data.
  return {
    uid,
    epoch,
    version,
    total: totals.total,
    mentions: totals.mentions,
    categories: Object.fromEntries(totals.categories),
    conversations: byConv(conversations),
  };
}
