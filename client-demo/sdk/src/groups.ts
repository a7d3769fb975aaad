import { addToTotals, byActivity, type Totals as SummedTotals } from '../../../protocol/view.js';
import type { ConversationView } from './types.js';

/**
 * Rows that belong to another row (PROTOCOL.md "Topics", "Threads"): a topic's row names its
 * conversation in `parent` (and its topic in `topic`); a thread's row names it the same way, with
 * its root's seq in `thread`. Grouping reads only `parent`, so any kind of child row slots in;
 * only the sums tell threads apart (a thread's replies never count in its conversation). Every
 * row keeps its own counts, reads and settings; these are list helpers over the rows, nothing more.
 */

/** A conversation with its child rows, as one entry of a list. */
export interface ConversationGroup {
  /** The conversation's id (the `parent` its child rows name). */
  conv: string;
  /** The conversation's own row; undefined when it is hidden (deleted) or not known while a child row is. */
  view: ConversationView | undefined;
  /** Its visible child rows (topics, threads), the newest last activity first, then by id. */
  children: ConversationView[];
  /**
   * `unread` summed over its own row and its topics' rows (muted rows included: what the rows
   * show). Not its threads': a reply never counts in the conversation (PROTOCOL.md "Threads").
   */
  unread: number;
  /** `unread` summed over its followed threads' rows (the server's row `threads.unread` counts only unmuted ones). */
  threadUnread: number;
  /** `mentions` summed over all its rows, threads' included (a thread's mentions count in the badge). */
  mentions: number;
  /**
   * What these rows add to `totals.total`, by the server's rule for each row: nothing for a muted
   * row (its mentions while the user's `mutedMentions` is on), only the mentions of a 'mentions'
   * row (`totals` stays the sum over every row).
   */
  inBadge: number;
  /** A row of the group is marked unread. */
  markedUnread: boolean;
  /** The newest last activity (ms) of its own and its topics' rows (a reply does not move the conversation in the list); absent: unknown. */
  at?: number;
}

/** Whether `view` is a child row (a topic's or a thread's). */
export function isChild(view: ConversationView): boolean {
  return view.parent !== undefined;
}

/** How a child row is named under its conversation: its topic, `#<root seq>` for a thread, else its id. */
export function childLabel(view: Pick<ConversationView, 'conv' | 'topic' | 'thread'>): string {
  if (view.topic !== undefined) return view.topic;
  if (view.thread !== undefined) return `#${view.thread}`;
  return view.conv;
}

/** The visible child rows of `conv`, the newest last activity first, then by id. */
export function childrenOf(conversations: readonly ConversationView[], conv: string): ConversationView[] {
  return conversations.filter((c) => c.parent === conv).sort(byActivity);
}

/**
 * `conv` with its child rows and their sums; undefined when neither it nor a child row of it is
 * visible. `mutedMentions`: the user's setting (`state.mutedMentions`), for `inBadge`.
 */
export function groupOf(conversations: readonly ConversationView[], conv: string, mutedMentions = false): ConversationGroup | undefined {
  const view = conversations.find((c) => c.conv === conv && !isChild(c));
  const children = childrenOf(conversations, conv);
  if (!view && children.length === 0) return undefined;
  return summed(conv, view, children, mutedMentions);
}

/**
 * The top level of a conversation list: one entry per conversation, its child rows inside it
 * (never beside it), the newest last activity of any of its rows first, then by id.
 * `mutedMentions`: the user's setting (`state.mutedMentions`), for each entry's `inBadge`.
 */
export function conversationGroups(conversations: readonly ConversationView[], mutedMentions = false): ConversationGroup[] {
  const own = new Map<string, ConversationView>();
  const children = new Map<string, ConversationView[]>();
  for (const c of conversations) {
    if (c.parent === undefined) own.set(c.conv, c);
    else {
      const rows = children.get(c.parent);
      if (rows) rows.push(c);
      else children.set(c.parent, [c]);
    }
  }
  const groups: ConversationGroup[] = [];
  for (const [conv, view] of own) groups.push(summed(conv, view, (children.get(conv) ?? []).sort(byActivity), mutedMentions));
  // A child row whose conversation's own row is hidden: still listed, under its conversation's id.
  for (const [conv, rows] of children) if (!own.has(conv)) groups.push(summed(conv, undefined, rows.sort(byActivity), mutedMentions));
  return groups.sort(newestFirst);
}

/** protocol/view.ts byActivity's order (the list's), for groups: the newest activity first, unknown last, ties by id. */
function newestFirst(a: ConversationGroup, b: ConversationGroup): number {
  const d = (b.at ?? 0) - (a.at ?? 0);
  if (d !== 0) return d;
  return a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0;
}

function summed(conv: string, view: ConversationView | undefined, children: ConversationView[], mutedMentions: boolean): ConversationGroup {
  const rows = view ? [view, ...children] : children;
  const badge: SummedTotals = { total: 0, mentions: 0, categories: new Map() };
  let unread = 0;
  let threadUnread = 0;
  let mentions = 0;
  let at = 0;
  for (const row of rows) {
    if (row.thread !== undefined) threadUnread += row.unread;
    else {
      unread += row.unread;
      at = Math.max(at, row.at ?? 0);
    }
    mentions += row.mentions;
    addToTotals(badge, row, mutedMentions);
  }
  return {
    conv,
    view,
    children,
    unread,
    threadUnread,
    mentions,
    inBadge: badge.total,
    markedUnread: rows.some((r) => r.markedUnread),
    ...(at > 0 ? { at } : {}),
  };
}
