import { nanoid } from 'nanoid';
import type { ConvEntry, Cursor, Snapshot } from '../../../protocol/types.js';
import type {
  ConvInfo,
  Engine,
  EngineOptions,
  RecordedMessage,
  StoredPull,
  StoredUserState,
  UserOp,
  UserOpResult,
} from '../engine.js';
import { applyRule, contribution, needsReset, sameRecord, snapshotInterval, toConvState, type StoredConv } from '../rules.js';

interface MemoryConversation {
  maxSeq: number;
  large: boolean;
  category: string;
  members: Set<string>;
}

interface MemoryUser {
  epoch: string;
  version: number;
  base: number;
  convs: Map<string, StoredConv>;
  /** Conversations the user is a member of (kept to size snapshots and intervals). */
  memberCount: number;
  totals: { total: number; mentions: number; categories: Map<string, number> };
  entries: ConvEntry[];
  snapshots: Snapshot[];
}

/**
 * The in-process engine: the default when no Redis is configured. Everything is synchronous
 * inside one call, which makes every method trivially atomic. A restart loses all state, and a
 * new epoch per user tells clients their cursors no longer apply.
 */
export class MemoryEngine implements Engine {
  readonly kind = 'memory' as const;
  private readonly conversations = new Map<string, MemoryConversation>();
  private readonly users = new Map<string, MemoryUser>();
  private closed = false;

  constructor(private readonly options: EngineOptions) {}

  async ensureConversation(conv: string, category?: string): Promise<ConvInfo> {
    let c = this.conversations.get(conv);
    if (!c) {
      c = { maxSeq: 0, large: false, category: category ?? 'default', members: new Set() };
      this.conversations.set(conv, c);
    } else if (category !== undefined) {
      c.category = category;
    }
    return info(conv, c);
  }

  async getConversation(conv: string): Promise<ConvInfo | null> {
    const c = this.conversations.get(conv);
    return c ? info(conv, c) : null;
  }

  async recordMessage(conv: string, seq: number): Promise<RecordedMessage | null> {
    const c = this.conversations.get(conv);
    if (!c) return null;
    c.maxSeq = Math.max(c.maxSeq, seq);
    return c.large ? { info: info(conv, c) } : { info: info(conv, c), members: [...c.members] };
  }

  async changeMembers(conv: string, add: readonly string[], remove: readonly string[]): Promise<number> {
    const c = this.requireConversation(conv);
    for (const uid of add) c.members.add(uid);
    for (const uid of remove) c.members.delete(uid);
    return c.members.size;
  }

  async members(conv: string): Promise<string[]> {
    return [...(this.conversations.get(conv)?.members ?? [])];
  }

  async setConversationMode(conv: string, large: boolean): Promise<void> {
    this.requireConversation(conv).large = large;
  }

  async heads(convs: readonly string[]): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const conv of convs) {
      const c = this.conversations.get(conv);
      if (c) out[conv] = c.maxSeq;
    }
    return out;
  }

  async applyUserOps(ops: readonly UserOp[]): Promise<UserOpResult[]> {
    return ops.map((op) => this.applyUserOp(op));
  }

  async pull(uid: string, since: Cursor | null, limit: number): Promise<StoredPull> {
    const user = this.user(uid);
    const largeConvs = [...user.convs.values()].filter((r) => r.member && r.large).map((r) => r.conv);
    const latest = user.snapshots.at(-1);
    const position = {
      epoch: user.epoch,
      version: user.version,
      base: user.base,
      latestSnapshot: latest?.v ?? 0,
      conversations: user.memberCount,
    };
    let snapshot: Snapshot | undefined;
    let from: number;
    if (needsReset(position, since, this.options.snapshotEvery)) {
      snapshot = latest ?? { v: 0, convs: [] };
      from = snapshot.v;
    } else {
      from = since?.version ?? 0;
    }
    const start = user.entries.findIndex((e) => e.v > from);
    const entries = start < 0 ? [] : user.entries.slice(start, start + limit);
    const version = entries.at(-1)?.v ?? from;
    return { epoch: user.epoch, ...(snapshot ? { snapshot } : {}), entries, version, more: version < user.version, largeConvs };
  }

  async position(uid: string): Promise<Cursor> {
    const user = this.user(uid);
    return { epoch: user.epoch, version: user.version };
  }

  async userState(uid: string): Promise<StoredUserState> {
    const user = this.user(uid);
    const states = [...user.convs.values()].filter((r) => r.member).map(toConvState);
    return {
      epoch: user.epoch,
      version: user.version,
      states,
      totals: {
        total: user.totals.total,
        mentions: user.totals.mentions,
        categories: Object.fromEntries([...user.totals.categories].filter(([, n]) => n !== 0)),
      },
    };
  }

  async ready(): Promise<boolean> {
    return !this.closed;
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  private applyUserOp(op: UserOp): UserOpResult {
    const user = this.user(op.uid);
    const before = user.convs.get(op.conv);
    const after = applyRule(before, op);
    const member = after?.member ?? false;
    const state = after?.member ? toConvState(after) : null;
    if (!after || sameRecord(before, after)) {
      return { changed: false, member, epoch: user.epoch, version: user.version, state };
    }
    this.adjustTotals(user, before, -1);
    this.adjustTotals(user, after, +1);
    user.memberCount += (after.member ? 1 : 0) - (before?.member ? 1 : 0);
    user.convs.set(op.conv, after);
    user.version += 1;
    user.entries.push({ v: user.version, conv: op.conv, state });
    this.maybeSnapshot(user);
    return { changed: true, member, epoch: user.epoch, version: user.version, state };
  }

  private adjustTotals(user: MemoryUser, rec: StoredConv | undefined, sign: 1 | -1): void {
    const c = contribution(rec);
    if (c.unread === 0 && c.mentions === 0) return;
    user.totals.total += sign * c.unread;
    user.totals.mentions += sign * c.mentions;
    user.totals.categories.set(c.category, (user.totals.categories.get(c.category) ?? 0) + sign * c.unread);
  }

  private maybeSnapshot(user: MemoryUser): void {
    const lastSnapshot = user.snapshots.at(-1)?.v ?? 0;
    if (user.version - lastSnapshot < snapshotInterval(this.options.snapshotEvery, user.memberCount)) return;
    const convs = [...user.convs.values()].filter((r) => r.member).map(toConvState);
    user.snapshots.push({ v: user.version, convs });
    // History is kept back to `base` (a snapshot boundary, or 0). Advance base to the newest
    // snapshot that still leaves streamMaxLen entries after it; never trim anywhere else.
    let base = user.base;
    for (const snap of user.snapshots) {
      if (snap.v > base && user.version - snap.v >= this.options.streamMaxLen) base = snap.v;
    }
    if (base > user.base) {
      user.base = base;
      user.snapshots = user.snapshots.filter((s) => s.v >= base);
      const keepFrom = user.entries.findIndex((e) => e.v > base);
      user.entries.splice(0, keepFrom < 0 ? user.entries.length : keepFrom);
    }
  }

  private user(uid: string): MemoryUser {
    let user = this.users.get(uid);
    if (!user) {
      user = {
        epoch: nanoid(12),
        version: 0,
        base: 0,
        convs: new Map(),
        memberCount: 0,
        totals: { total: 0, mentions: 0, categories: new Map() },
        entries: [],
        snapshots: [],
      };
      this.users.set(uid, user);
    }
    return user;
  }

  private requireConversation(conv: string): MemoryConversation {
    const c = this.conversations.get(conv);
    if (!c) throw new Error(`unknown conversation ${conv}`);
    return c;
  }
}

function info(conv: string, c: MemoryConversation): ConvInfo {
  return { conv, maxSeq: c.maxSeq, large: c.large, category: c.category, memberCount: c.members.size };
}
