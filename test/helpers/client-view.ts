import type { ConvState, ConvView, UnreadSummary } from '../../protocol/types.js';

/**
 * What a client shows from the states and heads it holds, written from PROTOCOL.md (*Shapes*,
 * *Read-diffused groups and `heads`*, *State rules*) and NOT from protocol/view.ts: the server's
 * GET /unread, the SDK and view.ts itself all derive summaries with view.ts, so test clients that
 * did too could never see a bug in that derivation. Every "client matches server" check compares
 * this with the server's answer.
 */
export function clientViews(states: Iterable<ConvState>, heads: Readonly<Record<string, number>>): ConvView[] {
  // Heads are looked up among own keys only: `__proto__` is a conversation id like any other.
  const headFor = new Map(Object.entries(heads));
  const views: ConvView[] = [];
  for (const s of states) {
    // effectiveLastSeq = large ? max(state.lastSeq, heads[conv] ?? 0) : state.lastSeq
    const lastSeq = s.large ? Math.max(s.lastSeq, headFor.get(s.conv) ?? 0) : s.lastSeq;
    // Hidden while effectiveLastSeq <= deletedSeq.
    if (!(lastSeq > s.deletedSeq)) continue;
    views.push({
      conv: s.conv,
      lastSeq,
      readSeq: s.readSeq,
      unread: lastSeq > s.readSeq ? lastSeq - s.readSeq : 0,
      mentions: s.mentions,
      muted: s.muted,
      markedUnread: s.markedUnread,
      category: s.category,
    });
  }
  return views.sort((a, b) => (a.conv === b.conv ? 0 : a.conv < b.conv ? -1 : 1));
}

/** The totals over the visible, unmuted conversations; `categories` holds only non-zero counts. */
export function clientSummary(
  uid: string,
  epoch: string,
  version: number,
  states: Iterable<ConvState>,
  heads: Readonly<Record<string, number>>,
): UnreadSummary {
  const conversations = clientViews(states, heads);
  const counted = conversations.filter((v) => !v.muted);
  // A Map, then fromEntries: a category named `__proto__` stays an own key, not the prototype.
  const byCategory = new Map<string, number>();
  for (const v of counted) if (v.unread > 0) byCategory.set(v.category, (byCategory.get(v.category) ?? 0) + v.unread);
  const categories = Object.fromEntries(byCategory);
  return {
    uid,
    epoch,
    version,
    total: counted.reduce((n, v) => n + v.unread, 0),
    mentions: counted.reduce((n, v) => n + v.mentions, 0),
    categories,
    conversations,
  };
}
