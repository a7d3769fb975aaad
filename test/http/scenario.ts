import { expect } from 'vitest';
import { ERROR_CODES } from '../../protocol/errors.js';
import { LIMITS } from '../../protocol/limits.js';
import type { UnreadSummary } from '../../protocol/types.js';
import { mulberry32 } from '../helpers/prng.js';
import type { ApiResponse, TestServer } from '../helpers/test-server.js';
import { type Action, allUsers, PROTO_CONVS, PROTO_USERS, type Scenario, USERS } from './actions.js';
import { Model, type ModelMessage, type ModelSummary, type ModelView, type Outcome, threadOf, topicOf, withoutPeers } from './model.js';
import { type ClientCopy, cloneCopy, copyViews, emptyCopy, syncCopy } from './sync-client.js';

/**
 * Runs random scenarios against a real server over HTTP and checks them against the reference
 * model. A run maps the actions' user and conversation indexes to ids unique to the run, so one
 * server serves every run without them seeing each other.
 */

let runCounter = 0;

/** The epoch of a user Redpoint has never seen (PROTOCOL.md). */
const NEVER_SEEN = '0';
/** Issue 43: the run's message times count back from here (a fixed instant: runs replay alike). */
const AT_BASE = 1_760_000_000_000;

/** Every counter at zero. */
const freshCoverage = () => ({
  runs: 0,
  actions: {} as Record<string, number>,
  notFound: 0,
  modeSwitches: 0,
  syncPages: 0,
  syncSnapshots: 0,
  savedCursorSyncs: 0,
  maxVersion: 0,
  protoNameRuns: 0,
  wipes: 0,
  /** Reads of a marked conversation at exactly its readSeq (the mark stays) and past it (the mark goes). */
  markedReadsAtReadSeq: 0,
  marksClearedByRead: 0,
  /** "Unread from here" acts that lowered a read position. */
  unreadsLowering: 0,
  /** shareReads turned off where a one-to-one chat of the user had a recorded position. */
  privacyHidPositions: 0,
  /** mutedMentions flips that moved the user's badge (a muted conversation had an unread mention). */
  mutedMentionsMoved: 0,
  /** Wipes after a lowering "unread from here" / with a one-to-one chat's position recorded (durable runs). */
  loweringsAcrossWipe: 0,
  positionsAcrossWipe: 0,
  /** Wipes at which a user's mutedMentions was on and moved their badge (a muted row with an unread mention): the restored setting must count it. */
  mutedMentionsAcrossWipe: 0,
  /** Issue 43: `counts: false` messages, messages with recalls, and those sent while the conversation was read-diffused. */
  nonCounting: 0,
  recalls: 0,
  recallsWhileLarge: 0,
  /** Threads: replies, follows that made a row, unfollows that dropped one, reads of a thread's row. */
  threadReplies: 0,
  follows: 0,
  unfollows: 0,
  threadReads: 0,
  /** Topics: messages of a topic, reads of a topic's row. */
  topicMessages: 0,
  topicReads: 0,
});
/** What the runs exercised, so a green run can show it was not vacuous. */
export const coverage = freshCoverage();

/** A counter of `coverage` (not `actions`). */
export type CoverageKey = Exclude<keyof typeof coverage, 'actions'>;

/**
 * Runs `batch`, then, while one of `claimed` has not moved since the start, `batch` with
 * `extraRuns` fresh scenarios, `extraBatches` times at most: a rare case a draw of random
 * scenarios happened to miss must not fail the run by chance, yet a claim still fails when the
 * scenarios stop making the case. Returns the claimed counters' moves, for the caller to check.
 */
export async function runUntilExercised(
  claimed: readonly CoverageKey[],
  batch: (runs?: number) => Promise<void>,
  more: { extraRuns: number; extraBatches: number; label: string },
): Promise<Record<CoverageKey, number>> {
  const before = structuredClone(coverage);
  const moved = (): Record<CoverageKey, number> => Object.fromEntries(claimed.map((key) => [key, coverage[key] - before[key]])) as Record<CoverageKey, number>;
  await batch();
  for (let extra = 1; extra <= more.extraBatches; extra++) {
    const missing = claimed.filter((key) => moved()[key] === 0);
    if (missing.length === 0) break;
    console.log(`[${more.label}] ${more.extraRuns} more runs (${extra} of ${more.extraBatches} at most): none yet of ${missing.join(', ')}`);
    await batch(more.extraRuns);
  }
  return moved();
}

/** `recalls` as seqs: offsets from `seq`, those that name a seq (>= 1). */
function recallsOf(seq: number, offsets: readonly number[] | undefined): { recalls?: number[] } {
  const seqs = [...new Set((offsets ?? []).map((k) => seq + k))].filter((s) => s >= 1 && s <= LIMITS.maxSeq && s !== seq);
  return seqs.length > 0 ? { recalls: seqs } : {};
}

/** Returns what was exercised since the last call, and starts counting afresh. */
export function takeCoverage(): typeof coverage {
  const taken = structuredClone(coverage);
  Object.assign(coverage, freshCoverage());
  return taken;
}

function count(key: string): void {
  coverage.actions[key] = (coverage.actions[key] ?? 0) + 1;
}

/** Runs one scenario on `server` and checks it against the model; throws on the first mismatch. */
/** What a run cannot do through the API: lose the store (`wipe` actions; test/durable/). */
export interface ScenarioHooks {
  wipe?(how: 'flushall' | 'empty'): Promise<void>;
}

export async function runScenario(server: TestServer, scenario: Scenario, hooks: ScenarioHooks = {}): Promise<void> {
  const run = new Run(server, `r${++runCounter}${server.kind[0]}`, scenario.protoNames === true, hooks);
  if (scenario.protoNames) coverage.protoNameRuns++;
  coverage.runs++;
  for (const [i, action] of scenario.actions.entries()) {
    run.step = i;
    await run.apply(action);
  }
  run.step = scenario.actions.length;
  await run.checkAll((u) => scenario.finalLimits[u] ?? 3, true);
}

interface SavedCopy {
  user: number;
  copy: ClientCopy;
}

class Run {
  step = 0;
  /** An "unread from here" lowered a read position since the last wipe. */
  private loweredSinceWipe = false;
  private readonly model: Model;
  private readonly nextSeq = new Map<string, number>();
  private readonly sent: ModelMessage[] = [];
  private held: ModelMessage[] = [];
  private readonly clients = new Map<number, ClientCopy>();
  private readonly saved: SavedCopy[] = [];
  private readonly versions = new Map<number, { epoch: string; version: number }>();
  /** The epoch each user's stream was first seen with, over GET unread and sync alike. */
  private readonly epochs = new Map<string, string>();
  private readonly large = new Set<number>();

  constructor(
    private readonly server: TestServer,
    private readonly ns: string,
    private readonly protoNames: boolean,
    private readonly hooks: ScenarioHooks = {},
  ) {
    this.model = new Model(server.config.largeGroupThreshold);
  }

  uid(u: number): string {
    return this.protoNames ? (PROTO_USERS[u] ?? `u${u}`) : `${this.ns}-u${u}`;
  }

  conv(c: number): string {
    return this.protoNames ? (PROTO_CONVS[c] ?? `c${c}`) : `${this.ns}-c${c}`;
  }

  /** The seq counter of a conversation, or of one of its threads or topics (each has its own seqs). */
  private seqKey(c: number, thread: number | undefined, topic?: string): string {
    if (thread !== undefined) return `${c}#r:${thread}`;
    return topic === undefined ? String(c) : `${c}#t:${topic}`;
  }

  /** The row a user operation names: the conversation, or one of its threads or topics. */
  private rowConv(c: number, thread: number | undefined, topic?: string): string {
    if (thread !== undefined) return threadOf(this.conv(c), thread);
    return topic === undefined ? this.conv(c) : topicOf(this.conv(c), topic);
  }

  /** The acting user: with `pick`, the `u`-th current member of the conversation (if it has any). */
  actor(u: number, c: number, pick: boolean): number {
    if (!pick) return u;
    const members = allUsers.filter((m) => this.model.isMember(this.uid(m), this.conv(c)));
    return members.length === 0 ? u : (members[u % members.length] as number);
  }

  async apply(a: Action): Promise<void> {
    count(a.t);
    switch (a.t) {
      case 'members': {
        const add = a.add.map((u) => this.uid(u));
        const remove = a.remove.map((u) => this.uid(u));
        const expected = this.model.changeMembers(this.conv(a.conv), add, remove, a.category);
        const body = { ...(add.length ? { add } : {}), ...(remove.length ? { remove } : {}), ...(a.category ? { category: a.category } : {}) };
        const res = await this.server.api<{ members: number; large: boolean }>('PUT', `/v1/conversations/${this.conv(a.conv)}/members`, body);
        this.expectStatus(res, 'ok', a);
        expect({ members: res.body.members, large: res.body.large }, this.where(a)).toEqual(expected);
        if (this.large.has(a.conv) !== expected.large) coverage.modeSwitches++;
        if (expected.large) this.large.add(a.conv);
        else this.large.delete(a.conv);
        return;
      }
      case 'msg': {
        // A thread's replies have their own seqs (PROTOCOL.md "Threads").
        const key = this.seqKey(a.conv, a.thread, a.topic);
        const seq = Math.min((this.nextSeq.get(key) ?? 0) + 1 + a.gap, LIMITS.maxSeq);
        this.nextSeq.set(key, seq);
        const mentions = a.mentions.map((u) => this.uid(u));
        const sender = this.uid(this.actor(a.sender, a.conv, a.pick));
        if (a.thread !== undefined) coverage.threadReplies++;
        if (a.topic !== undefined) coverage.topicMessages++;
        const msg: ModelMessage = {
          conv: this.conv(a.conv),
          ...(a.topic !== undefined ? { topic: a.topic } : {}),
          ...(a.thread !== undefined ? { thread: a.thread, ...(a.rootSender !== undefined ? { rootSender: this.uid(a.rootSender) } : {}) } : {}),
          seq,
          sender,
          ...(mentions.length ? { mentions } : {}),
          ...(a.everyone ? { mentionAll: true } : {}),
          ...(a.ago !== undefined ? { at: AT_BASE - a.ago } : {}),
          ...(a.quiet ? { counts: false } : {}),
          ...recallsOf(seq, a.recalls),
        };
        if (a.quiet) coverage.nonCounting++;
        if (msg.recalls) coverage.recalls++;
        if (msg.recalls && this.large.has(a.conv)) coverage.recallsWhileLarge++;
        this.sent.push(msg);
        if (a.hold) this.held.push(msg);
        else await this.post([msg], true, a);
        return;
      }
      case 'batch': {
        const picked = this.sent.length === 0 ? [] : a.picks.map((p) => this.sent[p % this.sent.length] as ModelMessage);
        const messages = shuffle([...(a.includeHeld ? this.held : []), ...picked], a.shuffle);
        if (a.includeHeld) this.held = [];
        if (messages.length === 0) return;
        await this.post(messages, a.single && messages.length === 1, a);
        return;
      }
      case 'concurrent': {
        // Thread replies are left out: a reply's implicit follow joins at the thread's head when it
        // runs, so two replies in flight at once do not commute (PROTOCOL.md "Threads", ordering).
        const sent = this.sent.filter((m) => m.thread === undefined);
        if (sent.length === 0) return;
        const messages = a.picks.map((p) => sent[p % sent.length] as ModelMessage);
        // Concurrent deliveries of messages commute (every field is a max-register or a set), so
        // the model may apply them in any order.
        const outcomes = messages.map((m) => this.model.postMessages([m]));
        const replies = await Promise.all(messages.map((m) => this.server.api('POST', '/v1/messages', m)));
        for (const [i, res] of replies.entries()) this.expectStatus(res, outcomes[i] ?? 'ok', a);
        return;
      }
      case 'read': {
        const u = this.actor(a.user, a.conv, a.pick);
        const top = this.nextSeq.get(this.seqKey(a.conv, a.thread, a.topic)) ?? 0;
        const conv = this.rowConv(a.conv, a.thread, a.topic);
        if (a.topic !== undefined && this.model.isMember(this.uid(u), conv)) coverage.topicReads++;
        if (a.thread !== undefined && this.model.isMember(this.uid(u), conv)) coverage.threadReads++;
        const at = this.model.readPosition(this.uid(u), conv);
        // A marked conversation opened again where the user already read (`all`, permille above
        // 550): the read moves nothing, so the mark stays. Other reads that reach past readSeq clear it.
        const again = a.all && a.permille > 550 && at?.markedUnread === true;
        const head = this.model.conversations.get(conv)?.maxSeq ?? 0;
        const seq = again ? (at?.readSeq ?? 0) : a.all ? head : Math.min(Math.floor((top * a.permille) / 1000), LIMITS.maxSeq);
        if (at?.markedUnread) {
          if (seq === at.readSeq) coverage.markedReadsAtReadSeq++;
          else if (seq > at.readSeq) coverage.marksClearedByRead++;
        }
        const gen = a.gen === undefined || !at ? undefined : Math.max(0, at.readGen - (a.gen === 'older' ? 1 : 0));
        const outcome = this.model.read(this.uid(u), conv, seq, gen);
        const res = await this.actAs(u, a.jwt, 'POST', `/v1/users/${this.uid(u)}/read`, { conv, seq, ...(gen !== undefined ? { gen } : {}) });
        this.expectStatus(res, outcome, a);
        return;
      }
      case 'unread': {
        const u = this.actor(a.user, a.conv, a.pick);
        const conv = this.conv(a.conv);
        const head = this.model.conversations.get(conv)?.maxSeq ?? 0;
        const seq = Math.max(1, Math.ceil((head * a.permille) / 1000));
        const at = this.model.readPosition(this.uid(u), conv);
        const gen = a.gen === 'none' ? undefined : (at?.readGen ?? 0) + (a.gen === 'next' ? 1 : 0);
        const body = { seq, ...(gen !== undefined && gen > 0 ? { gen } : {}) };
        if (at && seq <= head && seq - 1 < at.readSeq && a.gen !== 'same') {
          coverage.unreadsLowering++;
          this.loweredSinceWipe = true;
        }
        const outcome = this.model.unreadFrom(this.uid(u), conv, body.seq, body.gen);
        const res = await this.actAs(u, a.jwt, 'POST', `/v1/users/${this.uid(u)}/conversations/${conv}/unread-from`, body);
        this.expectStatus(res, outcome, a);
        return;
      }
      case 'delete': {
        const u = this.actor(a.user, a.conv, a.pick);
        const outcome = this.model.deleteConversation(this.uid(u), this.conv(a.conv));
        const res = await this.actAs(u, a.jwt, 'DELETE', `/v1/users/${this.uid(u)}/conversations/${this.conv(a.conv)}`);
        this.expectStatus(res, outcome, a);
        return;
      }
      case 'settings': {
        const u = this.actor(a.user, a.conv, a.pick);
        const settings = {
          ...(a.muted !== undefined ? { muted: a.muted } : {}),
          ...(a.markedUnread !== undefined ? { markedUnread: a.markedUnread } : {}),
          ...(a.level !== undefined ? { level: a.level } : {}),
        };
        const conv = this.rowConv(a.conv, a.thread, a.topic);
        const outcome = this.model.updateSettings(this.uid(u), conv, settings);
        const res = await this.actAs(u, a.jwt, 'PUT', `/v1/users/${this.uid(u)}/conversations/${encodeURIComponent(conv)}`, settings);
        this.expectStatus(res, outcome, a);
        return;
      }
      case 'follow': {
        const u = this.actor(a.user, a.conv, a.pick);
        const uid = this.uid(u);
        const conv = this.conv(a.conv);
        const following = this.model.isMember(uid, threadOf(conv, a.thread));
        const outcome = a.unfollow ? this.model.unfollow(uid, conv, a.thread) : this.model.follow(uid, conv, a.thread);
        const res = await this.actAs(u, a.jwt, a.unfollow ? 'DELETE' : 'PUT', `/v1/users/${uid}/conversations/${conv}/threads/${a.thread}`);
        this.expectStatus(res, outcome, a);
        if (outcome !== 'ok') return;
        const changed = a.unfollow ? following : !following && this.model.isMember(uid, threadOf(conv, a.thread));
        if (changed) coverage[a.unfollow ? 'unfollows' : 'follows']++;
        expect(res.body, `${this.where(a)} follow reply`).toEqual({ conv: threadOf(conv, a.thread), following: !a.unfollow, changed });
        return;
      }
      case 'shareReads': {
        const uid = this.uid(a.user);
        // Not vacuous: turning it off hides a one-to-one chat's recorded position (the user's or the peer's).
        const hides = [...this.model.conversations.values()].some((c) => c.members.size === 2 && c.members.has(uid) && c.seen.size > 0);
        if (!a.share && this.model.sharesReads(uid) && hides) coverage.privacyHidPositions++;
        this.model.setShareReads(uid, a.share);
        const res = await this.actAs(a.user, a.jwt, 'PUT', `/v1/users/${this.uid(a.user)}/settings`, { shareReads: a.share });
        this.expectStatus(res, 'ok', a);
        expect(res.body, `${this.where(a)} settings reply`).toEqual({
          uid: this.uid(a.user),
          shareReads: a.share,
          mutedMentions: this.model.unread(uid).mutedMentions === true,
        });
        return;
      }
      case 'mutedMentions': {
        const user = this.mutedMentionsUser(a);
        const uid = this.uid(user);
        const before = this.model.unread(uid).total;
        this.model.setMutedMentions(uid, a.on);
        if (this.model.unread(uid).total !== before) coverage.mutedMentionsMoved++;
        const res = await this.actAs(user, a.jwt, 'PUT', `/v1/users/${uid}/settings`, { mutedMentions: a.on });
        this.expectStatus(res, 'ok', a);
        expect(res.body, `${this.where(a)} settings reply`).toEqual({ uid, shareReads: this.model.sharesReads(uid), mutedMentions: a.on });
        // The change starts the user's stream over under a new epoch (PROTOCOL.md "Notification levels").
        this.epochs.delete(uid);
        return;
      }
      case 'sync': {
        const copy = a.fresh ? emptyCopy() : (this.clients.get(a.user) ?? emptyCopy());
        await this.sync(this.uid(a.user), copy, a.limit);
        this.clients.set(a.user, copy);
        this.saved.push({ user: a.user, copy: cloneCopy(copy) });
        expect(copyViews(copy), `${this.where(a)} client copy of ${this.uid(a.user)}`).toEqual(withoutPeers(this.model.unread(this.uid(a.user)).conversations));
        return;
      }
      case 'check':
        await this.checkAll(() => a.limit, false);
        return;
      case 'wipe': {
        if (!this.hooks.wipe) throw new Error('a wipe action needs a store that can be wiped (ScenarioHooks.wipe)');
        await this.hooks.wipe(a.how);
        // A lost store restores every user under a new epoch: each may change once more.
        this.epochs.clear();
        coverage.wipes++;
        // What the wipe had to restore (test/durable/property.test.ts checks the runs met both):
        // a read register lowered by "unread from here", and a one-to-one chat's recorded position.
        if (this.loweredSinceWipe) coverage.loweringsAcrossWipe++;
        this.loweredSinceWipe = false;
        if ([...this.model.conversations.values()].some((c) => c.members.size === 2 && c.seen.size > 0)) coverage.positionsAcrossWipe++;
        if (allUsers.some((u) => this.mutedMentionsMove(u) && this.model.unread(this.uid(u)).mutedMentions === true)) coverage.mutedMentionsAcrossWipe++;
        return;
      }
    }
  }

  /** With `pick`, `a.user` indexes the users with a muted row that has an unread mention (none: `a.user`). */
  private mutedMentionsUser(a: Extract<Action, { t: 'mutedMentions' }>): number {
    if (!a.pick) return a.user;
    const candidates = allUsers.filter((u) => this.mutedMentionsMove(u));
    return candidates.length === 0 ? a.user : (candidates[a.user % candidates.length] as number);
  }

  /** The user's `mutedMentions` setting moves their badge: a muted row of theirs has an unread mention. */
  private mutedMentionsMove(u: number): boolean {
    return this.model.unread(this.uid(u)).conversations.some((v) => v.muted && v.mentions > 0);
  }

  /** Every user: GET unread == model, totals == their sum, sync from scratch (and, at the end, from every saved cursor) == model. */
  async checkAll(limitFor: (u: number) => number, final: boolean): Promise<void> {
    for (let u = 0; u < USERS; u++) {
      const uid = this.uid(u);
      const expected = this.model.unread(uid);
      await this.checkUnread(u, expected);

      const scratch = emptyCopy();
      await this.sync(uid, scratch, limitFor(u));
      expect(copyViews(scratch), `${this.at()} sync from scratch of ${uid}`).toEqual(withoutPeers(expected.conversations));
      expect(scratch.mutedMentions, `${this.at()} sync from scratch of ${uid}: mutedMentions`).toBe(expected.mutedMentions === true);

      if (!final) continue;
      const client = this.clients.get(u);
      if (client) {
        await this.sync(uid, client, limitFor(u));
        expect(copyViews(client), `${this.at()} long-lived client of ${uid}`).toEqual(withoutPeers(expected.conversations));
        expect(client.mutedMentions, `${this.at()} long-lived client of ${uid}: mutedMentions`).toBe(expected.mutedMentions === true);
      }
      for (const [i, saved] of this.saved.entries()) {
        if (saved.user !== u) continue;
        const copy = cloneCopy(saved.copy);
        await this.sync(uid, copy, 1 + ((i + u) % 4));
        coverage.savedCursorSyncs++;
        expect(copyViews(copy), `${this.at()} sync of ${uid} from saved cursor ${JSON.stringify(saved.copy.cursor)}`).toEqual(
          withoutPeers(expected.conversations),
        );
      }
    }
  }

  private async sync(uid: string, copy: ClientCopy, limit: number): Promise<void> {
    const stats = await syncCopy(this.server, uid, copy, limit);
    if (copy.cursor) this.sameEpoch(uid, copy.cursor.epoch, `${this.at()} sync of ${uid}`);
    coverage.syncPages += stats.pages;
    coverage.syncSnapshots += stats.snapshots;
  }

  private async checkUnread(u: number, expected: ModelSummary): Promise<void> {
    const uid = this.uid(u);
    const res = await this.actAs(u, u % 2 === 0, 'GET', `/v1/users/${uid}/unread`);
    expect(res.status, `${this.at()} GET unread ${uid}: ${res.text}`).toBe(200);
    const got = res.body as UnreadSummary;
    const where = `${this.at()} GET unread ${uid}`;
    expect(got.conversations, `${where}: conversations`).toEqual(expected.conversations);
    // The stored totals must equal the sum of the conversations listed next to them.
    expect(got.mutedMentions, `${where}: mutedMentions`).toBe(expected.mutedMentions);
    const sum = sumViews(got.conversations, got.mutedMentions === true);
    expect({ total: got.total, mentions: got.mentions, categories: nonZero(got.categories) }, `${where}: totals vs their conversations`).toEqual(sum);
    expect(sum, `${where}: totals vs model`).toEqual({ total: expected.total, mentions: expected.mentions, categories: expected.categories });
    const before = this.versions.get(u);
    this.sameEpoch(uid, got.epoch, where);
    if (before && before.epoch === got.epoch) expect(got.version, `${where}: version went back`).toBeGreaterThanOrEqual(before.version);
    this.versions.set(u, { epoch: got.epoch, version: got.version });
    coverage.maxVersion = Math.max(coverage.maxVersion, got.version);
  }

  /**
   * This server never restarts and, but for a `wipe`, loses nothing: once a user has a real epoch
   * it must not change (only the never-seen user's `"0"` gives way to the first real one,
   * PROTOCOL.md *When the reply starts over*; a wipe allows one new epoch per user). A spurious rotation would pass every other check: clients
   * re-snapshot and still converge.
   */
  private sameEpoch(uid: string, epoch: string, where: string): void {
    const first = this.epochs.get(uid);
    if (first === undefined || first === NEVER_SEEN) {
      this.epochs.set(uid, epoch);
      return;
    }
    expect(epoch, `${where}: epoch changed on a server that never restarted`).toBe(first);
  }

  private async post(messages: ModelMessage[], single: boolean, a: Action): Promise<void> {
    const outcome = this.model.postMessages(messages);
    const res = await this.server.api('POST', '/v1/messages', single ? messages[0] : { messages });
    this.expectStatus(res, outcome, a);
  }

  private actAs(u: number, jwt: boolean, method: string, path: string, body?: unknown): Promise<ApiResponse> {
    return jwt ? this.server.asUser(this.uid(u), method, path, body) : this.server.api(method, path, body);
  }

  private expectStatus(res: ApiResponse, outcome: Outcome, a: Action): void {
    if (outcome !== 'ok') coverage.notFound++;
    if (outcome === 'ok') {
      expect(res.status, `${this.where(a)}: ${res.text}`).toBe(200);
    } else {
      expect({ status: res.status, code: (res.body as { error?: { code?: string } } | undefined)?.error?.code }, `${this.where(a)}: ${res.text}`).toEqual({
        status: ERROR_CODES[outcome].status,
        code: outcome,
      });
    }
  }

  private at(): string {
    return `[${this.ns} step ${this.step}]`;
  }

  private where(a: Action): string {
    return `${this.at()} ${JSON.stringify(a)}`;
  }
}

function sumViews(views: readonly ModelView[], mutedMentions: boolean): { total: number; mentions: number; categories: Record<string, number> } {
  let total = 0;
  let mentions = 0;
  // A Map: categories may be named like Object.prototype members.
  const categories = new Map<string, number>();
  for (const v of views) {
    if (v.muted && !mutedMentions) continue;
    // Level 'mentions' (or muted, with mutedMentions on): its mentions are its share of the badge.
    const counted = v.level === 'mentions' || v.muted ? v.mentions : v.unread;
    total += counted;
    mentions += v.mentions;
    if (counted > 0) categories.set(v.category, (categories.get(v.category) ?? 0) + counted);
  }
  return { total, mentions, categories: Object.fromEntries(categories) };
}

function nonZero(categories: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(categories).filter(([, n]) => n !== 0));
}

/** Deterministic Fisher–Yates (mulberry32), so a failing case replays exactly. */
function shuffle<T>(items: T[], seed: number): T[] {
  const next = mulberry32(seed);
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}
