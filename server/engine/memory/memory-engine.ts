import { nanoid } from 'nanoid';
import type { ConvEntry, Cursor, Snapshot } from '../../../protocol/types.js';
import {
  UNSEEN_EPOCH,
  type ApplyOptions,
  type ConvInfo,
  type Engine,
  type EngineOptions,
  type MembersChange,
  type MembersStep,
  type MemberTag,
  type MessageRecord,
  type RecordedMessage,
  type Roster,
  type StoredPull,
  type StoredUserState,
  type UserOp,
  type UserOpResult,
} from '../engine.js';
import type { EngineAdmin } from '../admin.js';
import { LocalNotifications } from './local-notifications.js';
import { MemoryAdmin } from './memory-admin.js';
import type { UserChange } from '../notifications.js';
import { decodeEntries, decodeSnapshotText, encodeEntryText, encodeSnapshotText } from '../state-text.js';
import {
  applyRule,
  contribution,
  needsReset,
  sameRecord,
  sameState,
  snapshotInterval,
  toConvState,
  trimmedBase,
  visibleState,
  type StoredConv,
} from '../rules.js';

export interface MemoryConversation {
  maxSeq: number;
  large: boolean;
  category: string;
  gen: number;
  /** Generation of a mode/category change whose member rewrite is not finished (0: none). */
  rewrite: number;
  members: Map<string, { joinGen: number; joinHead: number }>;
}

export interface MemoryUser {
  /** Chosen at the user's first visible change; until then the user is unseen (UNSEEN_EPOCH). */
  epoch: string | undefined;
  version: number;
  base: number;
  convs: Map<string, StoredConv>;
  memberCount: number;
  totals: { total: number; mentions: number; categories: Map<string, number> };
  /**
   * Entries after `base`, in version order: entry `i` is version `base + 1 + i`. Kept as the
   * Redis engine's entry texts (../state-text.ts), decoded when pulled: 100k users' streams are
   * then strings, not object graphs that every major GC has to walk.
   */
  entries: string[];
  /** The newest snapshot: its version and its text (decodeSnapshotText). */
  snapshot: { v: number; text: string };
}

/**
 * The in-process engine: the default when no Redis is configured. Everything is synchronous
 * inside one call, which makes every method trivially atomic; the multi-step protocols on top
 * (membership, ingest) still interleave between calls exactly as on Redis. A restart loses all
 * state, and a new epoch per user tells clients their cursors no longer apply.
 */
export class MemoryEngine implements Engine {
  readonly kind = 'memory' as const;
  readonly notifications = new LocalNotifications();
  private readonly conversations = new Map<string, MemoryConversation>();
  private readonly users = new Map<string, MemoryUser>();
  private closed = false;

  private toolbox: MemoryAdmin | undefined;

  constructor(private readonly options: EngineOptions) {}

  /** The operator's view of this store (server/engine/admin.ts): one per engine, sharing its state. */
  admin(): EngineAdmin {
    this.toolbox ??= new MemoryAdmin(this.conversations, this.users, this.notifications);
    return this.toolbox;
  }

  async changeMembers(conv: string, change: MembersChange): Promise<MembersStep> {
    let c = this.conversations.get(conv);
    let changed = false;
    if (!c) {
      c = { maxSeq: 0, large: false, category: change.category ?? 'default', gen: 0, rewrite: 0, members: new Map() };
      this.conversations.set(conv, c);
      changed = true;
    }
    const categoryChanged = change.category !== undefined && change.category !== c.category;
    if (categoryChanged && change.category !== undefined) c.category = change.category;
    const gen = Math.max(c.gen + 1, Date.now());
    const joins: MemberTag[] = [];
    for (const uid of new Set(change.add)) {
      let tag = c.members.get(uid);
      if (!tag) {
        tag = { joinGen: gen, joinHead: c.maxSeq };
        c.members.set(uid, tag);
        changed = true;
      }
      joins.push({ uid, ...tag });
    }
    const leaves = [...new Set(change.remove)];
    for (const uid of leaves) if (c.members.delete(uid)) changed = true;
    const large = c.members.size > change.threshold;
    const modeChanged = large !== c.large;
    c.large = large;
    if (changed || categoryChanged || modeChanged) c.gen = gen;
    if (categoryChanged || modeChanged) c.rewrite = gen;
    return { info: info(conv, c), joins, leaves, rewrite: c.rewrite !== 0 };
  }

  async roster(conv: string): Promise<Roster | null> {
    const c = this.conversations.get(conv);
    if (!c) return null;
    return { info: info(conv, c), members: [...c.members].map(([uid, tag]) => ({ uid, ...tag })) };
  }

  async finishRewrite(conv: string, gen: number): Promise<void> {
    const c = this.conversations.get(conv);
    if (c && c.rewrite !== 0 && c.rewrite <= gen) c.rewrite = 0;
  }

  async getConversation(conv: string): Promise<ConvInfo | null> {
    const c = this.conversations.get(conv);
    return c ? info(conv, c) : null;
  }

  async missingConversations(convs: readonly string[]): Promise<string[]> {
    return convs.filter((conv) => !this.conversations.has(conv));
  }

  async recordMessages(items: readonly MessageRecord[], at?: number): Promise<(RecordedMessage | null)[]> {
    return items.map((item) => this.recordMessage(item, at));
  }

  private recordMessage({ conv, seq, candidates }: MessageRecord, at: number | undefined): RecordedMessage | null {
    const c = this.conversations.get(conv);
    if (!c) return null;
    const raised = seq > c.maxSeq;
    if (raised) c.maxSeq = seq;
    if (!c.large) return { info: info(conv, c), members: [...c.members.keys()] };
    if (raised) this.notifications.head({ conv, maxSeq: c.maxSeq, ...(at !== undefined ? { at } : {}) });
    return { info: info(conv, c), members: candidates.filter((uid) => c.members.has(uid)) };
  }

  async heads(convs: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const conv of convs) {
      const c = this.conversations.get(conv);
      if (c) out.set(conv, c.maxSeq);
    }
    return out;
  }

  async applyUserOps(ops: readonly UserOp[], options: ApplyOptions = {}): Promise<UserOpResult[]> {
    const results: UserOpResult[] = [];
    const changes = new Map<string, UserChange[]>();
    for (const op of ops) {
      const result = this.applyUserOp(op);
      results.push(result);
      if (!result.changed) continue;
      let list = changes.get(op.uid);
      if (!list) changes.set(op.uid, (list = []));
      list.push({
        uid: op.uid,
        conv: op.conv,
        epoch: result.epoch,
        version: result.version,
        state: result.state,
        ...(options.at !== undefined ? { at: options.at } : {}),
      });
    }
    for (const list of changes.values()) this.notifications.user(list);
    if (options.results === false) return [];
    // One user's ops are one step: each result names the user's epoch after the step (a user's
    // first visible change gives it one), as the Redis engine's single reply per user does.
    ops.forEach((op, i) => {
      const r = results[i];
      if (r) r.epoch = this.users.get(op.uid)?.epoch ?? UNSEEN_EPOCH;
    });
    return results;
  }

  async pull(uid: string, since: Cursor | null, limit: number): Promise<StoredPull> {
    const user = this.users.get(uid);
    if (user?.epoch === undefined) return { epoch: UNSEEN_EPOCH, snapshot: { v: 0, convs: [] }, entries: [], version: 0, more: false, largeConvs: [] };
    const largeConvs = [...user.convs.values()].filter((r) => r.member && r.large).map((r) => r.conv);
    const position = {
      epoch: user.epoch,
      version: user.version,
      base: user.base,
      snapshotVersion: user.snapshot.v,
      interval: this.interval(user),
    };
    const reset = needsReset(position, since);
    const from = reset ? user.snapshot.v : (since?.version ?? 0);
    const entries = entriesAfter(user, from, Math.max(0, limit));
    const version = entries.at(-1)?.v ?? from;
    return { epoch: user.epoch, ...(reset ? { snapshot: snapshotOf(user) } : {}), entries, version, more: version < user.version, largeConvs };
  }

  async position(uid: string): Promise<Cursor> {
    const user = this.users.get(uid);
    return { epoch: user?.epoch ?? UNSEEN_EPOCH, version: user?.version ?? 0 };
  }

  async userState(uid: string): Promise<StoredUserState> {
    const user = this.users.get(uid);
    if (user?.epoch === undefined) return { epoch: UNSEEN_EPOCH, version: 0, states: [], totals: { total: 0, mentions: 0, categories: new Map() } };
    const states = [...user.convs.values()].filter((r) => r.member).map(toConvState);
    const categories = new Map([...user.totals.categories].filter(([, n]) => n !== 0));
    return { epoch: user.epoch, version: user.version, states, totals: { total: user.totals.total, mentions: user.totals.mentions, categories } };
  }

  async ready(): Promise<boolean> {
    return !this.closed;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private applyUserOp(op: UserOp): UserOpResult {
    const existing = this.users.get(op.uid);
    const before = existing?.convs.get(op.conv);
    const after = applyRule(before, op);
    const shownBefore = visibleState(before);
    const shown = visibleState(after);
    const changed = !sameState(shownBefore, shown);
    if (!after || sameRecord(before, after)) {
      return { changed: false, member: shown !== null, epoch: existing?.epoch ?? UNSEEN_EPOCH, version: existing?.version ?? 0, state: shown };
    }
    // A write that clients do not see (a pending record, a newer generation) keeps the record
    // silently; only a visible change moves the version (and gives a new user its epoch).
    const user = existing ?? this.createUser(op.uid);
    user.convs.set(op.conv, after);
    if (!changed) return { changed: false, member: shown !== null, epoch: user.epoch ?? UNSEEN_EPOCH, version: user.version, state: shown };
    user.epoch ??= newEpoch();
    this.adjustTotals(user, before, -1);
    this.adjustTotals(user, after, +1);
    user.memberCount += (after.member ? 1 : 0) - (before?.member ? 1 : 0);
    user.version += 1;
    user.entries.push(encodeEntryText(op.conv, shown));
    const interval = this.interval(user);
    if (user.version - user.snapshot.v >= interval) {
      user.snapshot = { v: user.version, text: encodeSnapshotText([...user.convs.values()].filter((r) => r.member).map(toConvState)) };
    }
    const base = trimmedBase(user.base, user.version, user.snapshot.v, interval);
    if (base > user.base) {
      user.entries.splice(0, base - user.base);
      user.base = base;
    }
    return { changed: true, member: shown !== null, epoch: user.epoch, version: user.version, state: shown };
  }

  private interval(user: MemoryUser): number {
    return snapshotInterval(this.options.snapshotEvery, this.options.streamMaxLen, user.memberCount);
  }

  private adjustTotals(user: MemoryUser, rec: StoredConv | undefined, sign: 1 | -1): void {
    const c = contribution(rec);
    if (c.unread === 0 && c.mentions === 0) return;
    user.totals.total += sign * c.unread;
    user.totals.mentions += sign * c.mentions;
    user.totals.categories.set(c.category, (user.totals.categories.get(c.category) ?? 0) + sign * c.unread);
  }

  private createUser(uid: string): MemoryUser {
    const user: MemoryUser = {
      epoch: undefined,
      version: 0,
      base: 0,
      convs: new Map(),
      memberCount: 0,
      totals: { total: 0, mentions: 0, categories: new Map() },
      entries: [],
      snapshot: { v: 0, text: '' },
    };
    this.users.set(uid, user);
    return user;
  }
}

/** Up to `limit` of the user's stream entries after version `v` (or after its base, if later), decoded. */
export function entriesAfter(user: MemoryUser, v: number, limit = Number.POSITIVE_INFINITY): ConvEntry[] {
  const from = Math.max(user.base, v);
  const start = from - user.base;
  return decodeEntries(user.entries.slice(start, start + limit), from + 1);
}

/** The user's newest snapshot, decoded. */
export function snapshotOf(user: MemoryUser): Snapshot {
  return { v: user.snapshot.v, convs: decodeSnapshotText(user.snapshot.text) };
}

/** Same length as the Redis engine's epochs. */
export function newEpoch(): string {
  return nanoid(12);
}

export function info(conv: string, c: MemoryConversation): ConvInfo {
  return { conv, maxSeq: c.maxSeq, large: c.large, category: c.category, memberCount: c.members.size, gen: c.gen };
}
