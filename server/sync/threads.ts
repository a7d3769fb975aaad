import { threadConv, threadPrefix } from '../../protocol/child-id.js';
import { RedpointError } from '../../protocol/errors.js';
import type { MessageEvent } from '../../protocol/types.js';
import type { Engine } from '../engine/engine.js';
import { afterPartOfIt } from '../engine/store-errors.js';
import { refusal, unknownConversation } from './conversation-errors.js';
import { changeMembership } from './membership.js';

/**
 * Threads (PROTOCOL.md "Threads"): a thread `(conv, root)` is the child conversation
 * `<conv>#r:<root>`, whose members are its followers, a subset of the conversation's members.
 * Every operation here is idempotent and retried by its caller until it succeeds:
 *
 * - **follow** = (1) join the thread's child (its conversation step and user step), (2) read the
 *   conversation's membership, and if the user is not a member, leave the child again;
 * - **leaving the conversation** = (1) the conversation's leave (sync-service.ts), (2) list the
 *   user's rows of the conversation's threads (their own records, `<conv>#r:` prefix), (3) leave each.
 *
 * A follow racing a leave ends unfollowed in both orders: if the leave's (1) landed before the
 * follow's (2), the follow sees it; otherwise the follow's (1) landed before the leave's (2),
 * which lists the row.
 *
 * A thread's rows take the conversation's category. The thread's child is given it whenever a
 * follow or a reply opens it, and re-checked after the write (`alignCategory`): the parent's is
 * read again, and written again until the two agree. A category change of the conversation lists
 * its threads (threadsOf: their registry, where a thread is registered before its child can be
 * made, and its members' thread rows) and aligns each the same way. The last write to a child is always
 * followed by a read of the parent that agrees with it; a parent change after that read would
 * write the child later still (its listing finds the child, registered before it was made): so the
 * child ends with the parent's category in any interleaving.
 */

/** What a follow did. */
type FollowOutcome = 'followed' | 'following' | 'not_a_member' | 'full';

export interface ThreadOptions {
  threshold: number;
  /** Threads a user may follow per conversation: LIMITS.threadsFollowedPerConversation (a test gives a smaller one). */
  cap: number;
  /** An implicit follow dropped at LIMITS.threadsFollowedPerConversation (the metric). */
  onFollowDropped?: (conv: string, uid: string) => void;
}

/** The thread replies of `messages` checked: `thread` with `topic` or `rootSender` alone is `invalid_request`. */
function checkReplies(messages: readonly MessageEvent[]): boolean {
  let any = false;
  messages.forEach((m, i) => {
    const where = messages.length > 1 ? `/messages/${i}` : '';
    if (m.thread === undefined) {
      if (m.rootSender !== undefined)
        throw new RedpointError('invalid_request', `${where}/rootSender: only a thread reply (with \`thread\`) names its root's sender`);
      return;
    }
    if (m.topic !== undefined) {
      throw new RedpointError(
        'invalid_request',
        `${where}/thread: threads of a topic's messages are not supported; a thread hangs off a message of the conversation itself (no \`topic\`)`,
      );
    }
    any = true;
  });
  return any;
}

/** Messages naming a `thread` go to its child conversation (the one place a reply is mapped). */
export function toThreadConvs(messages: readonly MessageEvent[]): readonly MessageEvent[] {
  if (!checkReplies(messages)) return messages;
  return messages.map((m) => {
    if (m.thread === undefined) return m;
    const { thread, rootSender: _follows, ...rest } = m;
    return { ...rest, conv: threadConv(m.conv, thread) };
  });
}

/**
 * Before `messages` (as given, not yet mapped) are recorded: each thread they reply in is
 * opened (its child exists, with the conversation's category), and its implicit followers follow
 * it: the root's sender, each replier and everyone a reply mentions, when members of the
 * conversation (others are skipped silently). A follower so joins at the thread's head before the
 * reply, and the reply counts for them. A non-counting reply (`counts: false`) makes no one follow.
 */
export async function openThreads(engine: Engine, options: ThreadOptions, messages: readonly MessageEvent[]): Promise<void> {
  const followers = new Map<string, { parent: string; root: number; uids: Set<string> }>();
  for (const m of messages) {
    if (m.thread === undefined) continue;
    const child = threadConv(m.conv, m.thread);
    let entry = followers.get(child);
    if (!entry) followers.set(child, (entry = { parent: m.conv, root: m.thread, uids: new Set() }));
    if (m.counts === false) continue;
    if (m.rootSender !== undefined) entry.uids.add(m.rootSender);
    entry.uids.add(m.sender);
    for (const uid of m.mentions ?? []) entry.uids.add(uid);
  }
  // A request naming an unknown conversation is refused whole, before any follow (ingest would refuse it after).
  const missing = await engine.missingConversations([...new Set(messages.map((m) => m.conv))]);
  if (missing.length > 0) throw unknownConversation(missing);
  await Promise.all(
    [...followers.values()].map(async ({ parent, root, uids }) => {
      await openThread(engine, options.threshold, parent, root);
      await Promise.all(
        [...uids].map(async (uid) => {
          const outcome = await follow(engine, options, parent, root, uid, true);
          if (outcome === 'full') options.onFollowDropped?.(parent, uid);
        }),
      );
    }),
  );
}

/** The thread's child exists and has the conversation's category; `unknown_conversation` when the conversation does not exist. */
async function openThread(engine: Engine, threshold: number, parent: string, root: number): Promise<void> {
  const child = threadConv(parent, root);
  // Registered before the child can be made (Engine.addThread): a child nobody follows is found by
  // a category change and by the operator's delete through the registry.
  const [info, own, known] = await Promise.all([engine.getConversation(parent), engine.getConversation(child), engine.addThread(parent, root)]);
  if (!info || !known) throw unknownConversation([parent]);
  if (own && own.category === info.category) return;
  await changeMembership(engine, threshold, child, { add: [], remove: [], category: info.category });
  await alignCategory(engine, threshold, parent, child);
}

/** How often alignCategory writes before it gives up (each write follows a parent change that raced it). */
const ALIGN_ATTEMPTS = 8;

/** Writes the parent's category to the thread's child until a read of the parent after the write agrees. */
async function alignCategory(engine: Engine, threshold: number, parent: string, child: string): Promise<void> {
  for (let attempt = 0; attempt < ALIGN_ATTEMPTS; attempt++) {
    const [info, own] = await Promise.all([engine.getConversation(parent), engine.getConversation(child)]);
    if (!info || !own || own.category === info.category) return;
    await changeMembership(engine, threshold, child, { add: [], remove: [], category: info.category });
  }
  throw new RedpointError('unavailable', `the category of ${parent} kept changing while its thread ${child} took it; retry`);
}

/**
 * How long a claimed follow counts against the cap without its join landing (Engine.claimJoins):
 * as for the conversation cap (conversation-cap.ts JOIN_HOLD_MS), far longer than a follow takes.
 */
const FOLLOW_HOLD_MS = 60_000;

/**
 * `uid` follows the thread `(parent, root)`: 'followed' (a new follower, at the thread's head
 * now), 'following' (already), 'not_a_member' (of the conversation: nothing kept), 'full' (the user
 * follows LIMITS.threadsFollowedPerConversation threads of it already: nothing kept).
 *
 * The cap is decided as the conversation cap is (conversation-cap.ts): a new follow is claimed on
 * the user, atomically with their thread rows of `parent` and the claims of their other follows of
 * it in flight (Engine.claimJoins, `within` the thread prefix). Concurrent follows of one user, from
 * any process, are thus decided one after the other: of N when k places are left, exactly k are
 * claimed, and a refusal saw every follow that will land. A retry finds its own claim.
 */
async function follow(
  engine: Engine,
  { threshold, cap }: ThreadOptions,
  parent: string,
  root: number,
  uid: string,
  registered = false,
): Promise<FollowOutcome> {
  const child = threadConv(parent, root);
  const [tag, parentTag] = await Promise.all([engine.joinTag(child, uid), engine.joinTag(parent, uid)]);
  if (!parentTag) {
    // A join of the child whose user step never landed (a failure, then the user left) is undone.
    if (tag) await unfollow(engine, threshold, parent, root, uid);
    return 'not_a_member';
  }
  if (!tag) {
    const terms = { cap, holdMs: FOLLOW_HOLD_MS, within: threadPrefix(parent) };
    // The thread registered before the join can make its child: here, unless the caller did
    // (openThread, once per thread for all of a reply's followers).
    const [[claim], known] = await Promise.all([engine.claimJoins(child, [uid], terms), registered || engine.addThread(parent, root)]);
    if (!known) return 'not_a_member';
    if (claim?.outcome === 'full') return 'full';
  }
  const info = await engine.getConversation(parent);
  if (!info) return 'not_a_member';
  // (1) The join, user step included: a leave listing the user's rows after this finds it. Made
  // for a follower too (the child's roster has them): it repeats the same join, so a retry after a
  // failure between the child's step and the user's step completes it.
  await changeMembership(engine, threshold, child, { add: [uid], remove: [], category: info.category });
  try {
    // (2) The conversation's membership, read after (1).
    if (!(await engine.joinTag(parent, uid))) {
      await unfollow(engine, threshold, parent, root, uid);
      return 'not_a_member';
    }
    await alignCategory(engine, threshold, parent, child);
  } catch (err) {
    throw afterPartOfIt(err);
  }
  return tag ? 'following' : 'followed';
}

/** `uid` stops following the thread: leaves its child (idempotent; a thread never followed, or unknown, changes nothing). Whether they followed it. */
export async function unfollow(engine: Engine, threshold: number, parent: string, root: number, uid: string): Promise<boolean> {
  const child = threadConv(parent, root);
  const [tag, info] = await Promise.all([engine.joinTag(child, uid), engine.getConversation(child)]);
  // Left even when not a member by the child's roster: a retry after a failure between the
  // child's step and the user's step redoes the user's (the step reports the leave again).
  if (info) await changeMembership(engine, threshold, child, { add: [], remove: [uid] });
  return tag !== null;
}

/** An explicit follow's errors: the conversation unknown, the user not in it (404/403), the cap (422). */
export async function followOrRefuse(engine: Engine, options: ThreadOptions, parent: string, root: number, uid: string): Promise<'followed' | 'following'> {
  const outcome = await follow(engine, options, parent, root, uid);
  if (outcome === 'not_a_member') throw await refusal(engine, uid, parent);
  if (outcome === 'full') {
    throw new RedpointError(
      'limit_exceeded',
      `${uid} follows ${options.cap} threads of ${parent} already (LIMITS.threadsFollowedPerConversation): unfollow one first`,
    );
  }
  return outcome;
}

/** The threads of `parent` the user follows (their rows). */
async function followedThreads(engine: Engine, uid: string, parent: string): Promise<string[]> {
  const prefix = threadPrefix(parent);
  const { states } = await engine.userState(uid);
  return states.filter((s) => s.conv.startsWith(prefix)).map((s) => s.conv);
}

/** After `uids` left `parent` (its step (1) landed): each leaves every thread of it they follow; returns the threads each left. */
export async function leaveThreads(
  engine: Engine,
  threshold: number,
  parent: string,
  uids: readonly string[],
): Promise<Array<{ uid: string; threads: string[] }>> {
  return Promise.all(
    uids.map(async (uid) => {
      const children = await followedThreads(engine, uid, parent);
      for (const child of children) await changeMembership(engine, threshold, child, { add: [], remove: [uid] });
      return { uid, threads: children };
    }),
  );
}

/** How many members' rows threadsOf reads at once (a large conversation's category change). */
const ROWS_READ_TOGETHER = 64;

/**
 * The threads of `parent`: its registry (Engine.threads: every thread, followed or not; the
 * durable tier puts it back with the conversation), and the members' thread rows (their own
 * records, `<conv>#r:` prefix), which also find a followed thread registered only in a Redis that
 * lost it before PostgreSQL kept registries (schema 13).
 */
export async function threadsOf(engine: Engine, parent: string): Promise<string[]> {
  const [roots, roster] = await Promise.all([engine.threads(parent), engine.roster(parent)]);
  const children = new Set(roots.map((root) => threadConv(parent, root)));
  const members = roster?.members ?? [];
  // The members' rows read together, a chunk at a time: one round trip's wait per chunk, not per member.
  for (let i = 0; i < members.length; i += ROWS_READ_TOGETHER) {
    const chunk = members.slice(i, i + ROWS_READ_TOGETHER);
    for (const rows of await Promise.all(chunk.map(({ uid }) => followedThreads(engine, uid, parent)))) for (const child of rows) children.add(child);
  }
  return [...children];
}

/** After a category change of `parent` landed: every thread of it takes the new category. */
export async function categoryToThreads(engine: Engine, threshold: number, parent: string): Promise<void> {
  const children = await threadsOf(engine, parent);
  await Promise.all(children.map((child) => alignCategory(engine, threshold, parent, child)));
}
