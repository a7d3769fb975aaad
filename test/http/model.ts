import { LIMITS } from '../../protocol/limits.js';
import type { ConvView, MessageEvent, UnreadSummary } from '../../protocol/types.js';

/**
 * The reference model of Redpoint's semantics, written from the specification alone (it does not
 * import the server's rules): plain maps, one method per API call, no notion of diffusion modes,
 * streams, versions or stored totals. Views and totals are recomputed from scratch on demand, so
 * there is nothing in here that could drift. Only the shapes of what it answers come from the
 * protocol (protocol/types.ts), so that its answers compare with the server's field for field.
 */

/** An ingest event, as POST /v1/messages takes it. */
export type ModelMessage = MessageEvent;

/** A conversation as GET /v1/users/:uid/unread lists it. */
export type ModelView = ConvView;

/** GET /v1/users/:uid/unread without uid, epoch and version; `categories` holds only non-zero counts. */
export type ModelSummary = Omit<UnreadSummary, 'uid' | 'epoch' | 'version'>;

/**
 * What the HTTP API answers: 200, 404 unknown_conversation, 403 not_a_member (the conversation
 * exists), or 400 invalid_request (an "unread from here" above the conversation's head).
 */
export type Outcome = 'ok' | 'unknown_conversation' | 'not_a_member' | 'invalid_request' | 'limit_exceeded';

/**
 * Topics (PROTOCOL.md "Topics"), as the specification states them: a topic of `conv` is the
 * conversation `<conv>#t:<topic>`, created by its first message with the conversation's members
 * and category, and from then on always with the conversation's members and category.
 */
export const topicOf = (conv: string, topic: string): string => `${conv}#t:${topic}`;

/**
 * Threads (PROTOCOL.md "Threads"), as the specification states them: a thread off message `root`
 * of `conv` is the conversation `<conv>#r:<root>`, whose members are its followers (members of
 * `conv` only), with `conv`'s category; its rows start at level `mentions`.
 */
export const threadOf = (conv: string, root: number): string => `${conv}#r:${root}`;
const isThread = (conv: string): boolean => conv.includes('#r:');
const defaultLevel = (conv: string): Level => (isThread(conv) ? 'mentions' : 'all');

interface Conversation {
  maxSeq: number;
  category: string;
  members: Set<string>;
  /**
   * Read receipts: each member's "has seen up to" (PROTOCOL.md "Read receipts"): raised to their
   * readSeq by their reads and deletes, never lowered, dropped when they leave. Everyone shares
   * here; a sender's own message does not raise it (RECEIPTS_ON_SEND is off by default).
   */
  seen: Map<string, number>;
  /** Last activity: the largest `at` of its messages (0: none). */
  at: number;
  /** @all seqs delivered while read-diffused (more members than the threshold): they stop counting when it stops being so. */
  everyoneWhileLarge: Set<number>;
  /** Its maxSeq when it last became read-diffused: an @all at or below it delivered while read-diffused is not counted (PROTOCOL.md). */
  largeFrom: number;
  /**
   * What counts (PROTOCOL.md "What counts"): the seqs that do not count, those of `counts: false`
   * messages and the recalled ones; a grow-only set, the same for every member (the cap of 1000
   * is never reached here).
   */
  nocount: Set<number>;
}

export type Level = 'all' | 'mentions' | 'none';

interface Membership {
  member: boolean;
  lastSeq: number;
  readSeq: number;
  /**
   * The read position is the pair (readGen, readSeq), compared lexicographically: "unread from
   * here" raises the generation; a read made in an older one than this changes nothing.
   */
  readGen: number;
  /** The conversation's head when this membership began: "unread from here" never goes below it. */
  joinHead: number;
  /** Every seq that mentioned the user since they (re)joined; only those > readSeq count. */
  mentionSeqs: Set<number>;
  /** The notification level ('none' is muted). */
  level: Level;
  markedUnread: boolean;
  /** Hidden while lastSeq <= hiddenUpTo; null: not deleted. */
  hiddenUpTo: number | null;
}

export const DEFAULT_CATEGORY = 'default';

export class Model {
  readonly conversations = new Map<string, Conversation>();
  /** Each conversation's topics. */
  private readonly topics = new Map<string, Set<string>>();
  private readonly users = new Map<string, Map<string, Membership>>();

  /** `maxConversationsPerUser`: MAX_CONVERSATIONS_PER_USER (0: no cap); `threadFollowCap`: threads followed per conversation. */
  constructor(
    readonly largeGroupThreshold: number,
    readonly maxConversationsPerUser = 0,
    readonly threadFollowCap: number = LIMITS.threadsFollowedPerConversation,
  ) {}

  /**
   * PUT /v1/conversations/:conv/members. Returns the member count after the change. A user at the
   * cap is left out (the call then answers 422 conversation_limit); the rest of the call is
   * applied, unless it asked nothing else.
   */
  changeMembers(conv: string, add: readonly string[], remove: readonly string[], category?: string): { members: number; large: boolean } {
    const cap = this.maxConversationsPerUser;
    const refused = cap > 0 ? [...new Set(add)].filter((uid) => !this.isMember(uid, conv) && this.conversationCount(uid) >= cap) : [];
    const admitted = add.filter((uid) => !refused.includes(uid));
    if (refused.length > 0 && admitted.length === 0 && remove.length === 0 && category === undefined) {
      const size = this.conversations.get(conv)?.members.size ?? 0;
      return { members: size, large: size > this.largeGroupThreshold };
    }
    const result = this.applyMembers(conv, admitted, remove, category);
    for (const topic of this.topics.get(conv) ?? []) this.inherit(conv, topic);
    // Threads: a leaver follows none of them any more, and they all take the category.
    for (const [child, c] of this.conversations) {
      if (!child.startsWith(`${conv}#r:`)) continue;
      this.applyMembers(child, [], remove);
      c.category = this.conversations.get(conv)?.category ?? c.category;
    }
    return result;
  }

  /** PUT /v1/users/:uid/conversations/:conv/threads/:root */
  follow(uid: string, conv: string, root: number): Outcome {
    const c = this.conversations.get(conv);
    if (!c) return 'unknown_conversation';
    if (!c.members.has(uid)) return 'not_a_member';
    const child = threadOf(conv, root);
    if (this.isMember(uid, child)) return 'ok';
    const followed = [...this.userConvs(uid)].filter(([id, m]) => m.member && id.startsWith(`${conv}#r:`)).length;
    if (followed >= this.threadFollowCap) return 'limit_exceeded';
    this.applyMembers(child, [uid], [], c.category);
    return 'ok';
  }

  /** DELETE /v1/users/:uid/conversations/:conv/threads/:root */
  unfollow(uid: string, conv: string, root: number): Outcome {
    const child = threadOf(conv, root);
    if (this.conversations.has(child)) this.applyMembers(child, [], [uid]);
    return 'ok';
  }

  /** A topic's conversation takes its parent's members and category. */
  private inherit(conv: string, topic: string): void {
    const parent = this.conversations.get(conv);
    if (!parent) return;
    const child = topicOf(conv, topic);
    const members = this.conversations.get(child)?.members ?? new Set<string>();
    this.applyMembers(
      child,
      [...parent.members].filter((uid) => !members.has(uid)),
      [...members].filter((uid) => !parent.members.has(uid)),
      parent.category,
    );
  }

  private conversationCount(uid: string): number {
    return [...(this.users.get(uid)?.values() ?? [])].filter((m) => m.member).length;
  }

  private applyMembers(conv: string, add: readonly string[], remove: readonly string[], category?: string): { members: number; large: boolean } {
    let c = this.conversations.get(conv);
    if (!c) {
      c = {
        maxSeq: 0,
        category: category ?? DEFAULT_CATEGORY,
        members: new Set(),
        seen: new Map(),
        at: 0,
        everyoneWhileLarge: new Set(),
        largeFrom: 0,
        nocount: new Set(),
      };
      this.conversations.set(conv, c);
    } else if (category !== undefined) {
      c.category = category;
    }
    const wasLarge = c.members.size > this.largeGroupThreshold;
    for (const uid of add) {
      if (c.members.has(uid)) continue;
      c.members.add(uid);
      const previous = this.membership(uid, conv);
      // A new member has seen (and read) everything up to the conversation's current head.
      this.userConvs(uid).set(conv, {
        member: true,
        lastSeq: Math.max(previous?.lastSeq ?? 0, c.maxSeq),
        readSeq: Math.max(previous?.readSeq ?? 0, c.maxSeq),
        readGen: previous?.readGen ?? 0,
        joinHead: c.maxSeq,
        mentionSeqs: new Set(),
        level: previous?.level ?? defaultLevel(conv),
        markedUnread: false,
        hiddenUpTo: null,
      });
    }
    for (const uid of remove) {
      c.seen.delete(uid);
      if (!c.members.has(uid)) continue;
      c.members.delete(uid);
      const m = this.membership(uid, conv);
      if (m) {
        m.member = false;
        m.mentionSeqs.clear();
        m.markedUnread = false;
      }
    }
    // PROTOCOL.md: @all mentions kept while read-diffused stop counting when it is no longer so.
    if (!wasLarge && c.members.size > this.largeGroupThreshold) c.largeFrom = c.maxSeq;
    if (wasLarge && c.members.size <= this.largeGroupThreshold) {
      for (const uid of c.members) for (const seq of c.everyoneWhileLarge) this.membership(uid, conv)?.mentionSeqs.delete(seq);
      c.everyoneWhileLarge.clear();
    }
    return { members: c.members.size, large: c.members.size > this.largeGroupThreshold };
  }

  /** POST /v1/messages (one message or a batch): all or nothing. */
  postMessages(messages: readonly ModelMessage[]): Outcome {
    if (messages.some((m) => (m.thread !== undefined && m.topic !== undefined) || (m.thread === undefined && m.rootSender !== undefined)))
      return 'invalid_request';
    // A topic's message names its conversation in `conv`: that conversation must exist.
    if (messages.some((m) => !this.conversations.has(m.conv))) return 'unknown_conversation';
    // Threads: each reply's thread exists (with the conversation's category), and its implicit
    // followers follow it, all before any message of the request is recorded.
    for (const m of messages) {
      if (m.thread === undefined) continue;
      const child = threadOf(m.conv, m.thread);
      if (!this.conversations.has(child)) this.applyMembers(child, [], [], this.conversations.get(m.conv)?.category);
      if (m.counts === false) continue;
      for (const uid of [m.rootSender, m.sender, ...(m.mentions ?? [])]) if (uid !== undefined) this.follow(uid, m.conv, m.thread);
    }
    // Topics: a message naming a new topic beyond the cap refuses the request.
    const fresh = new Map<string, Set<string>>();
    for (const m of messages) {
      if (m.topic === undefined || this.topics.get(m.conv)?.has(m.topic)) continue;
      let topics = fresh.get(m.conv);
      if (!topics) fresh.set(m.conv, (topics = new Set()));
      topics.add(m.topic);
    }
    for (const [conv, topics] of fresh) if ((this.topics.get(conv)?.size ?? 0) + topics.size > LIMITS.topicsPerConversation) return 'limit_exceeded';
    for (const [conv, topics] of fresh) {
      let known = this.topics.get(conv);
      if (!known) this.topics.set(conv, (known = new Set()));
      for (const topic of topics) {
        known.add(topic);
        this.inherit(conv, topic);
      }
    }
    for (const m of messages) {
      if (m.thread !== undefined) {
        const { thread, rootSender: _follows, ...rest } = m;
        this.deliver({ ...rest, conv: threadOf(m.conv, thread) });
      } else if (m.topic === undefined) this.deliver(m);
      else {
        const { topic, ...rest } = m;
        this.deliver({ ...rest, conv: topicOf(m.conv, topic) });
      }
    }
    return 'ok';
  }

  /** POST /v1/users/:uid/read; `gen`: the read generation the read was made in (absent: the current one). */
  read(uid: string, conv: string, seq: number, gen?: number): Outcome {
    const m = this.activeMembership(uid, conv);
    if (!m) return this.refusal(conv);
    mergeRead(m, gen ?? m.readGen, seq);
    this.seeUpTo(uid, conv, m.readSeq);
    return 'ok';
  }

  /**
   * POST /v1/users/:uid/conversations/:conv/unread-from: the position becomes (gen, seq − 1) if
   * that is above it, never below where the conversation was deleted nor below the head when the
   * user joined. `gen` absent: the next one.
   */
  unreadFrom(uid: string, conv: string, seq: number, gen?: number): Outcome {
    const c = this.conversations.get(conv);
    if (!c) return 'unknown_conversation';
    if (seq > c.maxSeq) return 'invalid_request';
    const m = this.activeMembership(uid, conv);
    if (!m) return 'not_a_member';
    mergeRead(m, gen ?? m.readGen + 1, Math.max(seq - 1, m.joinHead));
    return 'ok';
  }

  /** Read receipts: `uid` has seen `conv` up to `seq` (a max-register). */
  private seeUpTo(uid: string, conv: string, seq: number): void {
    // Privacy (shareReads false): never recorded.
    if (!this.sharesReads(uid)) return;
    const seen = this.conversations.get(conv)?.seen;
    if (seen) seen.set(uid, Math.max(seen.get(uid) ?? 0, seq));
  }

  // --- Mentions in muted conversations (issue 43, PROTOCOL.md "Notification levels") ---

  /** Users whose setting `mutedMentions` is on (the default is off). */
  private readonly mutedMentionsOn = new Set<string>();

  /** PUT /v1/users/:uid/settings {mutedMentions}: on, a muted conversation adds its unread mentions to the badge. */
  setMutedMentions(uid: string, on: boolean): void {
    if (on) this.mutedMentionsOn.add(uid);
    else this.mutedMentionsOn.delete(uid);
  }

  // --- Read receipts' privacy rule (issue 44, PROTOCOL.md "Privacy: `shareReads`") ---

  /** Users who turned `shareReads` off (the default is on). */
  private readonly notSharing = new Set<string>();

  sharesReads(uid: string): boolean {
    return !this.notSharing.has(uid);
  }

  /**
   * PUT /v1/users/:uid/settings {shareReads}. Off: the user's positions are dropped from every
   * conversation and no longer recorded, and the user sees no one else's. On again: each
   * conversation the user is a member of records the readSeq the user has now.
   */
  setShareReads(uid: string, share: boolean): void {
    if (!share) {
      this.notSharing.add(uid);
      for (const c of this.conversations.values()) c.seen.delete(uid);
      return;
    }
    this.notSharing.delete(uid);
    for (const [conv, m] of this.userConvs(uid)) if (m.member) this.seeUpTo(uid, conv, m.readSeq);
  }

  // --- end of the privacy rule ---

  /** A member's read position and mark (undefined: not a member): where a read "again" aims. */
  readPosition(uid: string, conv: string): { readSeq: number; readGen: number; markedUnread: boolean } | undefined {
    const m = this.activeMembership(uid, conv);
    return m ? { readSeq: m.readSeq, readGen: m.readGen, markedUnread: m.markedUnread } : undefined;
  }

  /** DELETE /v1/users/:uid/conversations/:conv */
  deleteConversation(uid: string, conv: string): Outcome {
    const m = this.activeMembership(uid, conv);
    const c = this.conversations.get(conv);
    if (!m || !c) return this.refusal(conv);
    const upTo = Math.max(c.maxSeq, m.lastSeq);
    raiseRead(m, upTo);
    this.seeUpTo(uid, conv, m.readSeq);
    m.hiddenUpTo = Math.max(m.hiddenUpTo ?? upTo, upTo);
    m.markedUnread = false;
    return 'ok';
  }

  /** PUT /v1/users/:uid/conversations/:conv */
  updateSettings(uid: string, conv: string, settings: { muted?: boolean; markedUnread?: boolean; level?: Level }): Outcome {
    const m = this.activeMembership(uid, conv);
    if (!m) return this.refusal(conv);
    if (settings.level !== undefined) m.level = settings.level;
    else if (settings.muted !== undefined) m.level = settings.muted ? 'none' : defaultLevel(conv);
    if (settings.markedUnread !== undefined) m.markedUnread = settings.markedUnread;
    return 'ok';
  }

  /** Why a user's op found no membership. */
  private refusal(conv: string): Outcome {
    return this.conversations.has(conv) ? 'not_a_member' : 'unknown_conversation';
  }

  /** GET /v1/users/:uid/unread, minus the version. */
  unread(uid: string): ModelSummary {
    const conversations: ModelView[] = [];
    let total = 0;
    let mentions = 0;
    // A Map: a category may be named `__proto__` like any other.
    const categories = new Map<string, number>();
    for (const [conv, m] of this.userConvs(uid)) {
      if (!m.member) continue;
      if (m.hiddenUpTo !== null && m.lastSeq <= m.hiddenUpTo) continue;
      const c = this.conversations.get(conv);
      if (!c) throw new Error(`model: membership of unknown conversation ${conv}`);
      // What counts: the non-counting seqs in (readSeq, lastSeq] are not unread.
      const notCounted = [...c.nocount].filter((s) => s > m.readSeq && s <= m.lastSeq).length;
      const unread = Math.max(0, m.lastSeq - m.readSeq - notCounted);
      const mentionCount = [...m.mentionSeqs].filter((s) => s > m.readSeq).length;
      // Read receipts: a one-to-one chat (2 members, so never read-diffused unless the threshold is 1) shows the peer's.
      // Never a thread's row: its two followers are no one-to-one chat (PROTOCOL.md "Threads").
      const peer = c.members.size === 2 && c.members.size <= this.largeGroupThreshold && !isThread(conv) ? [...c.members].find((u) => u !== uid) : undefined;
      // Privacy: shown only when both share (the peer's is not recorded otherwise).
      const peerReadSeq = peer === undefined || !this.sharesReads(uid) ? undefined : c.seen.get(peer);
      const split = conv.indexOf('#t:');
      const threadAt = conv.indexOf('#r:');
      conversations.push({
        conv,
        ...(split > 0 ? { parent: conv.slice(0, split), topic: conv.slice(split + 3) } : {}),
        ...(threadAt > 0 ? { parent: conv.slice(0, threadAt), thread: Number(conv.slice(threadAt + 3)) } : {}),
        lastSeq: m.lastSeq,
        readSeq: m.readSeq,
        unread,
        mentions: mentionCount,
        muted: m.level === 'none',
        markedUnread: m.markedUnread,
        category: c.category,
        ...(peerReadSeq !== undefined ? { peerReadSeq } : {}),
        ...(m.level === 'mentions' ? { level: 'mentions' as const } : {}),
        ...(c.at > 0 ? { at: c.at } : {}),
      });
      const mutedMentions = this.mutedMentionsOn.has(uid);
      if (m.level === 'none' && !mutedMentions) continue;
      // Mentions only (or muted, with the user's mutedMentions on): its unread mentions are its share of the badge.
      const counted = m.level === 'mentions' || m.level === 'none' ? mentionCount : unread;
      total += counted;
      mentions += mentionCount;
      if (counted > 0) categories.set(c.category, (categories.get(c.category) ?? 0) + counted);
    }
    conversations.sort((a, b) => (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0));
    // Threads: a conversation's row carries the sums over its unmuted thread rows, when above 0.
    for (const row of conversations) {
      let unread = 0;
      let mentionSum = 0;
      for (const t of conversations) {
        if (t.thread === undefined || t.parent !== row.conv || t.muted) continue;
        unread += t.unread;
        mentionSum += t.mentions;
      }
      if (unread > 0 || mentionSum > 0) row.threads = { unread, mentions: mentionSum };
    }
    return {
      total,
      mentions,
      categories: Object.fromEntries(categories),
      conversations,
      ...(this.mutedMentionsOn.has(uid) ? { mutedMentions: true as const } : {}),
    };
  }

  isMember(uid: string, conv: string): boolean {
    return this.conversations.get(conv)?.members.has(uid) ?? false;
  }

  private deliver(msg: ModelMessage): void {
    const c = this.conversations.get(msg.conv);
    if (!c) throw new Error('model: deliver to unknown conversation');
    c.maxSeq = Math.max(c.maxSeq, msg.seq);
    if (msg.at !== undefined) c.at = Math.max(c.at, msg.at);
    const large = c.members.size > this.largeGroupThreshold;
    // What counts: a `counts: false` message's seq and the recalled ones stop counting; a recalled
    // seq's mentions go, every member's, in either mode (PROTOCOL.md "What counts").
    const counts = msg.counts !== false;
    const gone = [...(counts ? [] : [msg.seq]), ...(msg.recalls ?? [])];
    for (const seq of gone) {
      c.nocount.add(seq);
      for (const uid of c.members) this.activeMembership(uid, msg.conv)?.mentionSeqs.delete(seq);
    }
    // A non-counting message's mentions and @all are ignored, and so are those of a seq recalled already.
    const mentioning = counts && !c.nocount.has(msg.seq);
    // @all: every member but the sender, above their read position (once: a Set); while
    // read-diffused only above the head it had when it became so (a late or repeated message
    // from before was counted then, or is not).
    if (mentioning && msg.mentionAll === true && !(large && msg.seq <= c.largeFrom)) {
      for (const uid of c.members) {
        // A read-diffused conversation keeps the @all seq without its sender (PROTOCOL.md "@all"):
        // the sender's raised readSeq covers it, until they mark it unread from at or below it.
        // It counts at read time there: a late @all below a member's readSeq counts once an
        // "unread from here" sets the position below it (the count filters by readSeq).
        const m = uid === msg.sender && !large ? undefined : this.activeMembership(uid, msg.conv);
        if (m && (large || msg.seq > m.readSeq)) m.mentionSeqs.add(msg.seq);
      }
      if (large) c.everyoneWhileLarge.add(msg.seq);
    }
    for (const uid of c.members) {
      const m = this.activeMembership(uid, msg.conv);
      if (!m) throw new Error('model: member without membership');
      m.lastSeq = Math.max(m.lastSeq, msg.seq);
    }
    const sender = this.activeMembership(msg.sender, msg.conv);
    if (sender) raiseRead(sender, msg.seq);
    // An @all message's own `mentions` add nothing to its @all (PROTOCOL.md): where its @all does not count, neither do they.
    for (const uid of new Set(msg.mentionAll === true || !mentioning ? [] : (msg.mentions ?? []))) {
      if (uid === msg.sender) continue;
      const m = this.activeMembership(uid, msg.conv);
      if (!m) continue;
      if (msg.seq > m.readSeq) m.mentionSeqs.add(msg.seq);
    }
  }

  private userConvs(uid: string): Map<string, Membership> {
    let convs = this.users.get(uid);
    if (!convs) {
      convs = new Map();
      this.users.set(uid, convs);
    }
    return convs;
  }

  private membership(uid: string, conv: string): Membership | undefined {
    return this.users.get(uid)?.get(conv);
  }

  private activeMembership(uid: string, conv: string): Membership | undefined {
    const m = this.membership(uid, conv);
    return m?.member ? m : undefined;
  }
}

/** readSeq is a max-register within a read generation; raising it clears the "mark as unread" dot. */
function raiseRead(m: Membership, seq: number): void {
  if (seq <= m.readSeq) return;
  m.readSeq = seq;
  m.markedUnread = false;
}

/**
 * (gen, seq) against the position, lexicographically: an older generation changes nothing, the
 * same raises, a newer one sets it, never below where the conversation was deleted (what was
 * deleted stays read), and clears the dot: the position says exactly what is unread.
 */
function mergeRead(m: Membership, gen: number, seq: number): void {
  if (gen < m.readGen) return;
  if (gen === m.readGen) return raiseRead(m, seq);
  m.readGen = gen;
  m.readSeq = Math.max(seq, m.hiddenUpTo ?? 0, 0);
  m.markedUnread = false;
}

/**
 * The views without read receipts' `peerReadSeq`: what a client's copy built from its stream shows
 * (a delta pull carries peers' positions only for the conversations in it: PROTOCOL.md "Read
 * receipts"; the from-scratch checks of conformance-model.ts compare them too).
 */
export function withoutPeers(views: readonly ModelView[]): ModelView[] {
  return views.map(({ peerReadSeq: _peer, ...view }) => view);
}
