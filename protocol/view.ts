import type { ConvState, ConvView, UnreadSummary } from './types.js';

/**
 * What a pull reply serves beside `heads` for read-diffused conversations (issue 43: PullReply
 * `headAt`, `mentionAll`): their last activity and @all seqs. Absent: none.
 */
export interface HeadExtras {
  headAt?: Readonly<Record<string, number>>;
  mentionAll?: Readonly<Record<string, readonly number[]>>;
  /** Issue 43 (PullReply `nocount`): the non-counting seqs of each read-diffused conversation that has any. */
  nocount?: Readonly<Record<string, readonly number[]>>;
}

function ownOf<T>(map: Readonly<Record<string, T>> | undefined, conv: string): T | undefined {
  return map !== undefined && Object.hasOwn(map, conv) ? map[conv] : undefined;
}

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

/**
 * The conversation's last activity (ms, 0 = unknown): the state's, or for a read-diffused one the
 * larger of it and the conversation's (`headAt`).
 */
function effectiveAt(state: ConvState, extras?: HeadExtras): number {
  const own = state.at ?? 0;
  if (!state.large) return own;
  return Math.max(own, ownOf(extras?.headAt, state.conv) ?? 0);
}

/**
 * Mentions: the state's, plus for a read-diffused conversation its @all seqs in (readSeq,
 * lastSeq] (the server never puts an @all seq among a state's own mentions: each counts once).
 */
function effectiveMentions(state: ConvState, lastSeq: number, extras?: HeadExtras): number {
  const all = state.large ? ownOf(extras?.mentionAll, state.conv) : undefined;
  if (all === undefined) return state.mentions;
  // A recalled @all (or one of a non-counting message) is no mention.
  const gone = ownOf(extras?.nocount, state.conv);
  let n = state.mentions;
  for (const seq of all) if (seq > state.readSeq && seq <= lastSeq && !gone?.includes(seq)) n++;
  return n;
}

/**
 * What unread leaves out: the state's `nocount`, or for a read-diffused conversation its kept
 * non-counting seqs in (readSeq, lastSeq] (a superset of the record's own: the larger of the two).
 */
function effectiveNocount(state: ConvState, lastSeq: number, extras?: HeadExtras): number {
  const own = state.nocount ?? 0;
  const kept = state.large ? ownOf(extras?.nocount, state.conv) : undefined;
  if (kept === undefined) return own;
  let n = 0;
  for (const seq of kept) if (seq > state.readSeq && seq <= lastSeq) n++;
  return Math.max(own, n);
}

/** `null` when the conversation is hidden (deleted and no newer message). */
export function toView(state: ConvState, heads: Readonly<Record<string, number>>, extras?: HeadExtras): ConvView | null {
  const lastSeq = effectiveLastSeq(state, heads);
  if (lastSeq <= state.deletedSeq) return null;
  const at = effectiveAt(state, extras);
  return {
    conv: state.conv,
    ...(state.parent !== undefined ? { parent: state.parent } : {}),
    ...(state.topic !== undefined ? { topic: state.topic } : {}),
    ...(state.thread !== undefined ? { thread: state.thread } : {}),
    lastSeq,
    readSeq: state.readSeq,
    // Issue 43: the non-counting seqs above readSeq.
    unread: Math.max(0, lastSeq - state.readSeq - effectiveNocount(state, lastSeq, extras)),
    mentions: effectiveMentions(state, lastSeq, extras),
    muted: state.muted,
    markedUnread: state.markedUnread,
    category: state.category,
    ...(state.level !== undefined ? { level: state.level } : {}),
    ...(at > 0 ? { at } : {}),
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
 * (level 'none') unless the user's setting `mutedMentions` is on, then only its mentions, as for
 * level 'mentions': each one unread of the badge. (rules.ts contribution, the stored totals, is
 * the share with the setting off; the server adds muted conversations' shares when it is on.)
 */
export function addToTotals(totals: Totals, view: ConvView, mutedMentions = false): void {
  if (view.muted && !mutedMentions) return;
  const unread = view.muted || view.level === 'mentions' ? view.mentions : view.unread;
  totals.total += unread;
  totals.mentions += view.mentions;
  if (unread > 0) totals.categories.set(view.category, (totals.categories.get(view.category) ?? 0) + unread);
}

/** The visible conversations, in the order of `states`. */
function visibleViews(states: Iterable<ConvState>, heads: Readonly<Record<string, number>>, extras?: HeadExtras): ConvView[] {
  const views: ConvView[] = [];
  for (const state of states) {
    const view = toView(state, heads, extras);
    if (view) views.push(view);
  }
  return views;
}

function byConv(views: ConvView[]): ConvView[] {
  return views.sort((a, b) => (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0));
}

/**
 * PROTOCOL.md "Threads": each conversation's row carries `threads`, the sums of `unread` and
 * `mentions` over the user's visible thread rows of it that are not muted (level `none`), when
 * either is above 0. In place; the server's `/unread` and the SDK's summary both call it, so the
 * sums are one derivation. A display figure only: the totals count each thread row itself.
 */
function withThreadSums(views: ConvView[]): ConvView[] {
  let sums: Map<string, { unread: number; mentions: number }> | undefined;
  for (const view of views) {
    if (view.thread === undefined || view.parent === undefined || view.muted) continue;
    sums ??= new Map();
    const sum = sums.get(view.parent) ?? { unread: 0, mentions: 0 };
    sum.unread += view.unread;
    sum.mentions += view.mentions;
    sums.set(view.parent, sum);
  }
  if (!sums) return views;
  for (const view of views) {
    const sum = sums.get(view.conv);
    if (sum && (sum.unread > 0 || sum.mentions > 0)) view.threads = sum;
  }
  return views;
}

/** The visible conversations, sorted by id, with their threads' sums: the list of an unread summary. */
export function conversationViews(states: Iterable<ConvState>, heads: Readonly<Record<string, number>>, extras?: HeadExtras): ConvView[] {
  return byConv(withThreadSums(visibleViews(states, heads, extras)));
}

/**
 * The order of a conversation list (issue 43): the newest last activity first, unknown (0) last;
 * ties by id, so every device shows one order for one state.
 */
export function byActivity(a: ConvView, b: ConvView): number {
  const d = (b.at ?? 0) - (a.at ?? 0);
  if (d !== 0) return d;
  return a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0;
}

export function summarize(
  uid: string,
  epoch: string,
  version: number,
  states: Iterable<ConvState>,
  heads: Readonly<Record<string, number>>,
  extras?: HeadExtras,
  mutedMentions = false,
): UnreadSummary {
  const conversations = visibleViews(states, heads, extras);
  const totals: Totals = { total: 0, mentions: 0, categories: new Map() };
  for (const view of conversations) addToTotals(totals, view, mutedMentions);
  // Object.fromEntries defines own properties: a category named `__proto__` stays data.
  return {
    uid,
    epoch,
    version,
    total: totals.total,
    mentions: totals.mentions,
    categories: Object.fromEntries(totals.categories),
    conversations: byConv(withThreadSums(conversations)),
    ...(mutedMentions ? { mutedMentions: true as const } : {}),
  };
}
