import type { ConvState, ConvView, UnreadSummary } from '../../protocol/types.js';

/**
 * What a client shows from the states and heads it holds, written from PROTOCOL.md (*Shapes*,
 * *Read-diffused groups and `heads`*, *State rules*) and NOT from protocol/view.ts: the server's
 * GET /unread, the SDK and view.ts itself all derive summaries with view.ts, so test clients that
 * did too could never see a bug in that derivation. Every "client matches server" check compares
 * this with the server's answer.
 */
export function clientViews(
  states: Iterable<ConvState>,
  heads: Readonly<Record<string, number>>,
  extras: {
    headAt?: Readonly<Record<string, number>>;
    mentionAll?: Readonly<Record<string, readonly number[]>>;
    nocount?: Readonly<Record<string, readonly number[]>>;
  } = {},
): ConvView[] {
  // Heads are looked up among own keys only: `__proto__` is a conversation id like any other.
  const headFor = new Map(Object.entries(heads));
  const atFor = new Map(Object.entries(extras.headAt ?? {}));
  const allFor = new Map(Object.entries(extras.mentionAll ?? {}));
  const nocountFor = new Map(Object.entries(extras.nocount ?? {}));
  const views: ConvView[] = [];
  for (const s of states) {
    // effectiveLastSeq = large ? max(state.lastSeq, heads[conv] ?? 0) : state.lastSeq
    const lastSeq = s.large ? Math.max(s.lastSeq, headFor.get(s.conv) ?? 0) : s.lastSeq;
    // Hidden while effectiveLastSeq <= deletedSeq.
    if (!(lastSeq > s.deletedSeq)) continue;
    // Last activity: large ? max(state.at, headAt[conv]) : state.at; absent when unknown.
    const at = Math.max(s.at ?? 0, s.large ? (atFor.get(s.conv) ?? 0) : 0);
    // A large group's non-counting seqs (PullReply nocount): those in (readSeq, lastSeq] are not
    // unread, and an @all among them is no mention; the state's own nocount when larger.
    const gone = s.large ? (nocountFor.get(s.conv) ?? []) : [];
    const inRange = (seq: number) => seq > s.readSeq && seq <= lastSeq;
    // @all of a large group: each of its seqs in (readSeq, lastSeq] is one more mention.
    const everyone = s.large ? (allFor.get(s.conv) ?? []).filter((seq) => inRange(seq) && !gone.includes(seq)).length : 0;
    const nocount = Math.max(s.nocount ?? 0, gone.filter(inRange).length);
    views.push({
      conv: s.conv,
      // A topic's row names its conversation and topic (PROTOCOL.md "Topics").
      ...(s.parent !== undefined ? { parent: s.parent } : {}),
      ...(s.topic !== undefined ? { topic: s.topic } : {}),
      // A thread's row names its conversation and root (PROTOCOL.md "Threads").
      ...(s.thread !== undefined ? { thread: s.thread } : {}),
      lastSeq,
      readSeq: s.readSeq,
      // unread = (lastSeq − readSeq) − nocount (PROTOCOL.md "What counts"), never below 0.
      unread: Math.max(0, lastSeq - s.readSeq - nocount),
      mentions: s.mentions + everyone,
      muted: s.muted,
      markedUnread: s.markedUnread,
      category: s.category,
      ...(s.level !== undefined ? { level: s.level } : {}),
      ...(at > 0 ? { at } : {}),
    });
  }
  // A conversation's row: `threads`, the sums over its visible thread rows not muted, when either is above 0 (PROTOCOL.md "Threads").
  for (const row of views) {
    const followed = views.filter((t) => t.thread !== undefined && t.parent === row.conv && !t.muted);
    const unread = followed.reduce((n, t) => n + t.unread, 0);
    const mentions = followed.reduce((n, t) => n + t.mentions, 0);
    if (unread > 0 || mentions > 0) row.threads = { unread, mentions };
  }
  return views.sort((a, b) => (a.conv === b.conv ? 0 : a.conv < b.conv ? -1 : 1));
}

/**
 * The totals over the visible, unmuted conversations (with `mutedMentions`, a muted one adds its
 * mentions, as a level-'mentions' one does); `categories` holds only non-zero counts.
 */
export function clientSummary(
  uid: string,
  epoch: string,
  version: number,
  states: Iterable<ConvState>,
  heads: Readonly<Record<string, number>>,
  extras: {
    headAt?: Readonly<Record<string, number>>;
    mentionAll?: Readonly<Record<string, readonly number[]>>;
    nocount?: Readonly<Record<string, readonly number[]>>;
    /** The user's setting, as the pull reply carried it. */
    mutedMentions?: boolean;
  } = {},
): UnreadSummary {
  const conversations = clientViews(states, heads, extras);
  const mutedMentions = extras.mutedMentions === true;
  // Level 'mentions' (or muted, with mutedMentions): its mentions are its share of the badge (each one unread).
  const counted = conversations.filter((v) => !v.muted || mutedMentions).map((v) => (v.level === 'mentions' || v.muted ? { ...v, unread: v.mentions } : v));
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
    ...(mutedMentions ? { mutedMentions: true as const } : {}),
  };
}
