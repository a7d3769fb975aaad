import { expect } from 'vitest';
import { RedpointError } from '../../protocol/errors.js';
import type { ConvState, Cursor, MessageEvent, PullReply } from '../../protocol/types.js';
import type { Engine } from '../../server/engine/engine.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { clientViews } from '../helpers/client-view.js';
import { type Level, Model, type ModelSummary, type Outcome, threadOf, topicOf } from '../http/model.js';

/**
 * The engine checked against an INDEPENDENT model: random API calls (membership crossing the
 * large-group threshold both ways, messages with mentions, redeliveries, reads, deletes,
 * settings) go through SyncService onto the engine, and the reference model of the HTTP property
 * test (test/http/model.ts, written from the specification, importing nothing of the server)
 * says what every user must show. conformance-random.ts checks the engine against rules.ts, which
 * the memory engine runs itself and user_apply.lua ports line by line: that is the code compared
 * with itself. Here three things are compared with the model after every few calls:
 *
 * - the raw states a pull from scratch brings (snapshot, entries, heads), turned into views by
 *   helpers/client-view.ts (PROTOCOL.md, not protocol/view.ts);
 * - the engine's STORED totals, which must equal the model's sum over the write-diffused,
 *   visible, unmuted conversations (read-diffused ones are summed at read time);
 * - the server's own summary (SyncService.unread, with protocol/view.ts).
 *
 * Issue 43: topics and threads too, as SyncService drives the engine for them (sync/topics.ts,
 * sync/threads.ts): topics' messages (their own seq spaces, the parent's members and category),
 * thread replies (implicit followers: root's sender, replier, mentioned), follows and unfollows,
 * and reads, "unread from here", deletes and settings on the children's rows; all of it
 * redelivered, and some of it late (a message held back and sent after later ones). The parent
 * rows' `threads` sums are compared in the views and the summary.
 */
const USERS = ['u0', 'u1', 'u2', 'u3', '__proto__'];
const CONVS = ['g0', 'g1', 'constructor'];
const CATEGORIES = ['private', 'group', '__proto__'];
const THRESHOLD = 2;
/** Few topics and thread roots per conversation, so messages, follows and reads on them meet. */
const TOPICS = ['a', '__proto__'];
const ROOTS = 2;

type Step =
  | { t: 'members'; conv: string; add: string[]; remove: string[]; category?: string }
  | { t: 'message'; message: MessageEvent; late?: boolean }
  | { t: 'redeliver'; messages: MessageEvent[] }
  | { t: 'follow'; uid: string; conv: string; root: number; unfollow: boolean }
  | { t: 'read'; uid: string; conv: string; seq: number; gen?: number }
  | { t: 'unread-from'; uid: string; conv: string; seq: number; gen?: number }
  | { t: 'delete'; uid: string; conv: string }
  | { t: 'settings'; uid: string; conv: string; muted?: boolean; markedUnread?: boolean; level?: Level };

/** What a run exercised, so a green run can show it was not vacuous. */
export interface ModelRunStats {
  checks: number;
  switches: number;
  notFound: number;
  /** Reads of a marked conversation at exactly its readSeq (the mark stays) and past it (the mark goes). */
  markedReadsAtReadSeq: number;
  marksClearedByRead: number;
  /** Reads made in an older read generation than the user's (after an "unread from here" they had not seen). */
  staleReads: number;
  /** "Unread from here" acts that lowered readSeq. */
  unreadsLowering: number;
  /** Issue 43: checks that met a 'mentions'-level conversation whose unread differs from its mentions, and an unread @all in a read-diffused one. */
  mentionsLevelDiffers: number;
  everyoneInLarge: number;
  /** Issue 43, what counts: `counts: false` messages, messages with recalls, and those sent to a read-diffused conversation; checks that met a read-diffused one with non-counting seqs above a member's readSeq. */
  nonCounting: number;
  recalls: number;
  recallsWhileLarge: number;
  nocountInLarge: number;
  /** Issue 43, topics and threads: topics' messages and thread replies recorded; messages sent after later ones of their row; explicit follows that followed and unfollows that unfollowed. */
  topicMessages: number;
  replies: number;
  lateMessages: number;
  follows: number;
  unfollows: number;
  /** Reads, "unread from here", deletes and settings on a topic's or a thread's row that applied. */
  childRowOps: number;
  /** Checks that met a thread row with something unread, a parent row with `threads` sums, a read-diffused child row. */
  threadRowsUnread: number;
  threadSums: number;
  largeChildren: number;
}

/** Every counter of a run at zero (a run's start, and the sum over several runs). */
export function noModelRunStats(): ModelRunStats {
  return {
    checks: 0,
    switches: 0,
    notFound: 0,
    markedReadsAtReadSeq: 0,
    marksClearedByRead: 0,
    staleReads: 0,
    unreadsLowering: 0,
    mentionsLevelDiffers: 0,
    everyoneInLarge: 0,
    nonCounting: 0,
    recalls: 0,
    recallsWhileLarge: 0,
    nocountInLarge: 0,
    topicMessages: 0,
    replies: 0,
    lateMessages: 0,
    follows: 0,
    unfollows: 0,
    childRowOps: 0,
    threadRowsUnread: 0,
    threadSums: 0,
    largeChildren: 0,
  };
}

export async function modelRandomRun(engine: Engine, rand: () => number, steps: number): Promise<ModelRunStats> {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T;
  const subset = <T>(list: readonly T[], p: number): T[] => list.filter(() => rand() < p);
  const sync = new SyncService(engine, { largeGroupThreshold: THRESHOLD });
  const model = new Model(THRESHOLD);
  /** The next seq of each row's own seq space (a conversation's, a topic's, a thread's). */
  const nextSeq = new Map<string, number>();
  const sent: MessageEvent[] = [];
  /** Messages held back when their seq was skipped: sent later, after higher seqs of their row (reorders). */
  const late: MessageEvent[] = [];
  const stats = noModelRunStats();

  const members = (conv: string): string[] => USERS.filter((u) => model.isMember(u, conv));
  /** Mostly a member of `conv` (the paths that apply), sometimes anyone (the 404 paths). */
  const actor = (conv: string): string => {
    const m = members(conv);
    return m.length > 0 && rand() < 0.85 ? pick(m) : pick(USERS);
  };
  /** The row a user op aims at: mostly the conversation, else one of its topics or threads (sometimes one not made yet: 404). */
  const row = (conv: string): string => {
    if (rand() < 0.65) return conv;
    const children = [...model.conversations.keys()].filter((id) => id.startsWith(`${conv}#`));
    if (children.length > 0 && rand() < 0.85) return pick(children);
    return rand() < 0.5 ? topicOf(conv, pick(TOPICS)) : threadOf(conv, 1 + Math.floor(rand() * ROOTS));
  };

  /** The (user, row) pairs of `conv` and its children marked unread. */
  const markedRows = (conv: string): Array<[string, string]> =>
    [...model.conversations.keys()]
      .filter((id) => id === conv || id.startsWith(`${conv}#`))
      .flatMap((id) => USERS.filter((uid) => model.readPosition(uid, id)?.markedUnread).map((uid): [string, string] => [uid, id]));

  /** A message of `conv`'s row `where` (the conversation, a topic or a thread) at `seq`. */
  const drawMessage = (conv: string, place: Pick<MessageEvent, 'topic' | 'thread' | 'rootSender'>, where: string, seq: number): MessageEvent => {
    const mentions = subset(USERS, 0.25);
    // Issue 43: @all now and then, a time mostly (sometimes none, sometimes older than the last).
    const everyone = rand() < 0.12 ? { mentionAll: true } : {};
    const at = rand() < 0.8 ? { at: 1_760_000_000_000 + seq * 1000 - Math.floor(rand() * 3000) } : {};
    // Issue 43, what counts: an edit or reaction that does not count now and then, and recalls
    // of earlier seqs or of ones not sent yet (a recall before its message).
    const quiet = rand() < 0.15 ? { counts: false } : {};
    const recalled =
      rand() < 0.15 ? [...new Set([seq - 1 - Math.floor(rand() * 4), ...(rand() < 0.3 ? [seq + 1 + Math.floor(rand() * 2)] : [])])].filter((s) => s >= 1) : [];
    const recalls = recalled.length > 0 ? { recalls: recalled } : {};
    if (quiet.counts === false) stats.nonCounting++;
    if (recalled.length > 0) {
      stats.recalls++;
      if (members(where).length > THRESHOLD) stats.recallsWhileLarge++;
    }
    return { conv, seq, sender: actor(conv), ...place, ...(mentions.length > 0 ? { mentions } : {}), ...everyone, ...at, ...quiet, ...recalls };
  };

  const randomStep = (): Step => {
    const conv = pick(CONVS);
    const r = rand();
    if (r < 0.16) {
      const add = subset(USERS, 0.4);
      const remove = subset(USERS, 0.25).filter((u) => !add.includes(u));
      return { t: 'members', conv, add, remove, ...(rand() < 0.3 ? { category: pick(CATEGORIES) } : {}) };
    }
    if (r < 0.5) {
      // Issue 43: a topic's message, a thread reply (sometimes naming the root's sender, a member
      // or not), or the conversation's own; now and then both (refused: invalid_request).
      const k = rand();
      const both = k > 0.98;
      const topic = k < 0.2 || both ? pick(TOPICS) : undefined;
      const thread = (k >= 0.2 && k < 0.4) || both ? 1 + Math.floor(rand() * ROOTS) : undefined;
      const place: Pick<MessageEvent, 'topic' | 'thread' | 'rootSender'> = {
        ...(topic !== undefined ? { topic } : {}),
        ...(thread !== undefined ? { thread, ...(rand() < 0.5 ? { rootSender: pick(USERS) } : {}) } : {}),
      };
      const where = thread !== undefined ? threadOf(conv, thread) : topic !== undefined ? topicOf(conv, topic) : conv;
      // Sometimes a seq is skipped and its message held back: sent later (a reorder).
      const skip = rand() < 0.1;
      const seq = (nextSeq.get(where) ?? 0) + 1 + (skip ? 1 : 0);
      nextSeq.set(where, seq);
      if (skip) late.push(drawMessage(conv, place, where, seq - 1));
      return { t: 'message', message: drawMessage(conv, place, where, seq) };
    }
    if (r < 0.54 && late.length > 0) return { t: 'message', message: late.splice(Math.floor(rand() * late.length), 1)[0] as MessageEvent, late: true };
    if (r < 0.6 && sent.length > 0) return { t: 'redeliver', messages: Array.from({ length: 1 + Math.floor(rand() * 3) }, () => pick(sent)) };
    if (r < 0.66) {
      // Follows of any thread (some not opened yet); unfollows mostly of one the user follows.
      const uid = actor(conv);
      const roots = Array.from({ length: ROOTS }, (_, i) => i + 1);
      const followed = roots.filter((root) => model.isMember(uid, threadOf(conv, root)));
      if (rand() < 0.4) {
        const root = followed.length > 0 && rand() < 0.8 ? pick(followed) : pick(roots);
        return { t: 'follow', uid, conv, root, unfollow: true };
      }
      return { t: 'follow', uid, conv, root: pick(roots), unfollow: false };
    }
    if (r < 0.8) {
      // Often a row someone marked unread (rows and marks are spread over children now).
      const marked = rand() < 0.5 ? markedRows(conv) : [];
      const chosen = marked.length > 0 ? pick(marked) : undefined;
      const where = chosen?.[1] ?? row(conv);
      const uid = chosen?.[0] ?? actor(where);
      const at = model.readPosition(uid, where);
      // Some reads of a marked conversation land where the user already read: nothing moves, so the mark stays.
      const seq = at?.markedUnread && rand() < 0.4 ? at.readSeq : Math.floor(rand() * ((nextSeq.get(where) ?? 0) + 2));
      if (at?.markedUnread) {
        if (seq === at.readSeq) stats.markedReadsAtReadSeq++;
        else if (seq > at.readSeq) stats.marksClearedByRead++;
      }
      // Some reads carry the generation they were made in: the current one, or an older one (a
      // device that had not seen an "unread from here" yet).
      if (at && rand() < 0.4) {
        const gen = Math.max(0, at.readGen - (rand() < 0.5 ? 1 : 0));
        if (gen < at.readGen) stats.staleReads++;
        return { t: 'read', uid, conv: where, seq, gen };
      }
      return { t: 'read', uid, conv: where, seq };
    }
    if (r < 0.85) {
      // "Unread from here": of the next generation, a retry of the current one, or with none (the
      // server's next); sometimes above the head (refused).
      const where = row(conv);
      const uid = actor(where);
      const at = model.readPosition(uid, where);
      const head = nextSeq.get(where) ?? 0;
      const seq = 1 + Math.floor(rand() * (head + (rand() < 0.1 ? 3 : 0)));
      const g = rand();
      const gen = g < 0.2 ? undefined : (at?.readGen ?? 0) + (g < 0.35 ? 0 : 1);
      if (at && seq - 1 < at.readSeq && seq <= head && (gen === undefined || gen > at.readGen)) stats.unreadsLowering++;
      return { t: 'unread-from', uid, conv: where, seq, ...(gen !== undefined && gen > 0 ? { gen } : {}) };
    }
    if (r < 0.89) {
      const where = row(conv);
      return { t: 'delete', uid: actor(where), conv: where };
    }
    const where = row(conv);
    return {
      t: 'settings',
      uid: actor(where),
      conv: where,
      ...(rand() < 0.6 ? { muted: rand() < 0.5 } : {}),
      ...(rand() < 0.6 ? { markedUnread: rand() < 0.5 } : {}),
      // Issue 43: the level alone (with muted it must agree: refused otherwise).
      ...(rand() < 0.5 ? { level: pick(['all', 'mentions', 'mentions', 'none'] as const), muted: undefined } : {}),
    };
  };

  /** What the engine answered, as the model's outcome (404 unknown_conversation, 403 not_a_member, else ok). */
  const outcomeOf = async (run: () => Promise<unknown>): Promise<Outcome> => {
    try {
      await run();
      return 'ok';
    } catch (err) {
      if (err instanceof RedpointError && (err.code === 'unknown_conversation' || err.code === 'not_a_member' || err.code === 'invalid_request'))
        return err.code;
      throw err;
    }
  };

  const apply = async (step: Step): Promise<{ expected: Outcome; got: Outcome }> => {
    switch (step.t) {
      case 'members': {
        const wasLarge = members(step.conv).length > THRESHOLD;
        const expected = model.changeMembers(step.conv, step.add, step.remove, step.category);
        if (wasLarge !== expected.large && model.conversations.get(step.conv)) stats.switches++;
        const got = await sync.changeMembers(step.conv, { add: step.add, remove: step.remove, ...(step.category ? { category: step.category } : {}) });
        expect({ members: got.members, large: got.large }).toEqual(expected);
        return { expected: 'ok', got: 'ok' };
      }
      case 'message': {
        const expected = model.postMessages([step.message]);
        if (expected === 'ok') {
          sent.push(step.message);
          if (step.message.topic !== undefined) stats.topicMessages++;
          if (step.message.thread !== undefined) stats.replies++;
          if (step.late) stats.lateMessages++;
        }
        return { expected, got: await outcomeOf(() => sync.postMessages([step.message])) };
      }
      case 'redeliver':
        return { expected: model.postMessages(step.messages), got: await outcomeOf(() => sync.postMessages(step.messages)) };
      case 'follow': {
        if (step.unfollow) {
          if (model.isMember(step.uid, threadOf(step.conv, step.root))) stats.unfollows++;
          return { expected: model.unfollow(step.uid, step.conv, step.root), got: await outcomeOf(() => sync.unfollowThread(step.uid, step.conv, step.root)) };
        }
        const expected = model.follow(step.uid, step.conv, step.root);
        if (expected === 'ok') stats.follows++;
        return { expected, got: await outcomeOf(() => sync.followThread(step.uid, step.conv, step.root)) };
      }
      case 'read':
        return {
          expected: model.read(step.uid, step.conv, step.seq, step.gen),
          got: await outcomeOf(() => sync.read(step.uid, step.conv, step.seq, step.gen)),
        };
      case 'unread-from':
        return {
          expected: model.unreadFrom(step.uid, step.conv, step.seq, step.gen),
          got: await outcomeOf(() => sync.unreadFrom(step.uid, step.conv, step.seq, step.gen)),
        };
      case 'delete':
        return { expected: model.deleteConversation(step.uid, step.conv), got: await outcomeOf(() => sync.deleteConversation(step.uid, step.conv)) };
      case 'settings': {
        const change = {
          ...(step.muted !== undefined ? { muted: step.muted } : {}),
          ...(step.markedUnread !== undefined ? { markedUnread: step.markedUnread } : {}),
          ...(step.level !== undefined ? { level: step.level } : {}),
        };
        return { expected: model.updateSettings(step.uid, step.conv, change), got: await outcomeOf(() => sync.updateSettings(step.uid, step.conv, change)) };
      }
    }
  };

  const check = async (label: string): Promise<void> => {
    stats.checks++;
    for (const uid of USERS) {
      const want = model.unread(uid);
      const where = `${label}, user ${uid}`;
      for (const v of want.conversations) {
        if (v.level === 'mentions' && v.unread !== v.mentions) stats.mentionsLevelDiffers++;
        if (v.thread !== undefined && (v.unread > 0 || v.mentions > 0)) stats.threadRowsUnread++;
        if (v.threads) stats.threadSums++;
      }
      // 1. A pull from scratch, raw states turned into views from PROTOCOL.md.
      const { states, heads, peers, extras } = await pullAll(sync, uid);
      const views = clientViews(states.values(), heads, extras).map((v) => {
        // Read receipts: a pull from scratch carries every one-to-one peer's position (peerReads).
        const peer = peers.get(v.conv);
        return peer === undefined ? v : { ...v, peerReadSeq: peer };
      });
      expect(views, `${where}: pulled from scratch`).toEqual(want.conversations);
      const everyone = new Map(Object.entries(extras.mentionAll ?? {}));
      for (const s of states.values()) if (s.large && (everyone.get(s.conv) ?? []).some((seq) => seq > s.readSeq)) stats.everyoneInLarge++;
      const kept = new Map(Object.entries(extras.nocount ?? {}));
      for (const s of states.values()) if (s.large && (kept.get(s.conv) ?? []).some((seq) => seq > s.readSeq)) stats.nocountInLarge++;
      for (const s of states.values()) if (s.large && s.parent !== undefined) stats.largeChildren++;
      // 2. The stored totals: the write-diffused share of the model's totals.
      const stored = await engine.userState(uid);
      expect(
        {
          total: stored.totals.total,
          mentions: stored.totals.mentions,
          categories: Object.fromEntries([...stored.totals.categories].filter(([, n]) => n !== 0)),
        },
        `${where}: stored totals`,
      ).toEqual(writeDiffusedTotals(model, want, uid));
      // 3. The server's summary.
      const { uid: _u, epoch: _e, version: _v, ...summary } = await sync.unread(uid);
      expect(summary, `${where}: unread summary`).toEqual(want);
    }
  };

  for (let i = 0; i < steps; i++) {
    const step = randomStep();
    const { expected, got } = await apply(step);
    if (expected !== 'ok') stats.notFound++;
    else if ('conv' in step && step.t !== 'follow' && step.conv.includes('#')) stats.childRowOps++;
    expect(got, `step ${i}: ${JSON.stringify(step)}`).toBe(expected);
    if (i % 10 === 9) await check(`after step ${i}`);
  }
  await check('at the end');
  return stats;
}

async function pullAll(
  sync: SyncService,
  uid: string,
): Promise<{
  states: Map<string, ConvState>;
  heads: Record<string, number>;
  peers: Map<string, number>;
  extras: Pick<PullReply, 'headAt' | 'mentionAll' | 'nocount'>;
}> {
  const states = new Map<string, ConvState>();
  const peers = new Map<string, number>();
  let heads: Record<string, number> = {};
  let extras: Pick<PullReply, 'headAt' | 'mentionAll' | 'nocount'> = {};
  let since: Cursor | null = null;
  for (let page = 0; page < 1000; page++) {
    const reply = await sync.pull(uid, since, 3);
    if (reply.snapshot) {
      states.clear();
      peers.clear();
      for (const s of reply.snapshot.convs) states.set(s.conv, s);
    }
    for (const e of reply.entries) {
      if (e.state) states.set(e.conv, e.state);
      else states.delete(e.conv);
    }
    heads = reply.heads;
    for (const [conv, seq] of Object.entries(reply.peerReads ?? {})) peers.set(conv, seq);
    extras = {
      ...(reply.headAt ? { headAt: reply.headAt } : {}),
      ...(reply.mentionAll ? { mentionAll: reply.mentionAll } : {}),
      ...(reply.nocount ? { nocount: reply.nocount } : {}),
    };
    since = { epoch: reply.epoch, version: reply.version };
    if (!reply.more) return { states, heads, peers, extras };
  }
  throw new Error(`pull of ${uid} did not finish in 1000 pages`);
}

/** The model's totals over the conversations at or below the threshold (write-diffused), visible and unmuted. */
function writeDiffusedTotals(model: Model, summary: ModelSummary, uid: string): Pick<ModelSummary, 'total' | 'mentions' | 'categories'> {
  const categories = new Map<string, number>();
  let total = 0;
  let mentions = 0;
  for (const v of summary.conversations) {
    const size = model.conversations.get(v.conv)?.members.size ?? 0;
    if (v.muted || size > THRESHOLD || !model.isMember(uid, v.conv)) continue;
    const counted = v.level === 'mentions' ? v.mentions : v.unread;
    total += counted;
    mentions += v.mentions;
    if (counted > 0) categories.set(v.category, (categories.get(v.category) ?? 0) + counted);
  }
  return { total, mentions, categories: Object.fromEntries(categories) };
}
