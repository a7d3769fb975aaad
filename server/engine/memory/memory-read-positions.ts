import type { ConvReads, ReadDetail, ReadPosition, ReadPositions, ReadsChange } from '../read-positions.js';
import type { LocalNotifications } from './local-notifications.js';
import type { MemoryConversation } from './memory-state.js';
import { tableHas, tableSize } from './text-table.js';

/** The memory engine's read receipts: a map per conversation, a set of users who do not share. */
export class MemoryReadPositions implements ReadPositions {
  /** conv → uid → position. */
  private readonly registers = new Map<string, Map<string, number>>();
  /** Users who turned sharing off (the default, sharing, is stored as nothing). */
  private readonly private = new Set<string>();
  /** Users who turned mutedMentions on (the default, off, is stored as nothing). */
  private readonly mentionedWhenMuted = new Set<string>();

  constructor(
    private readonly conversations: ReadonlyMap<string, MemoryConversation>,
    private readonly notifications: LocalNotifications,
  ) {}

  async raise(items: readonly ReadPosition[]): Promise<boolean[]> {
    return items.map(({ conv, uid, seq }) => {
      const c = this.conversations.get(conv);
      if (!c || !tableHas(c.members, uid)) return false;
      let register = this.registers.get(conv);
      if (!register) this.registers.set(conv, (register = new Map()));
      if ((register.get(uid) ?? -1) >= seq) return false;
      register.set(uid, seq);
      return true;
    });
  }

  async drop(uid: string, convs: readonly string[]): Promise<void> {
    for (const conv of convs) this.registers.get(conv)?.delete(uid);
  }

  async read(convs: readonly string[], detail: ReadDetail): Promise<Map<string, ConvReads>> {
    const out = new Map<string, ConvReads>();
    for (const conv of convs) {
      const c = this.conversations.get(conv);
      if (!c) continue;
      const register = this.registers.get(conv) ?? new Map<string, number>();
      const memberCount = tableSize(c.members);
      const listed = !c.large && memberCount <= detail.upTo;
      out.set(conv, {
        memberCount,
        large: c.large,
        maxSeq: c.maxSeq,
        positions: listed ? new Map(register) : new Map(),
        counts: (detail.seqs ?? []).map((seq) => [...register.values()].filter((p) => p >= seq).length),
        member: detail.member !== undefined && tableHas(c.members, detail.member),
        own: detail.member === undefined ? null : (register.get(detail.member) ?? null),
      });
    }
    return out;
  }

  async peers(uid: string, convs: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (const conv of convs) {
      const c = this.conversations.get(conv);
      if (!c || tableSize(c.members) !== 2) continue;
      for (const [member, seq] of this.registers.get(conv) ?? []) if (member !== uid) out.set(conv, Math.max(seq, out.get(conv) ?? 0));
    }
    return out;
  }

  async sharing(uids: readonly string[]): Promise<boolean[]> {
    return uids.map((uid) => !this.private.has(uid));
  }

  async setSharing(uid: string, share: boolean): Promise<void> {
    if (share) this.private.delete(uid);
    else this.private.add(uid);
  }

  async mutedMentions(uid: string): Promise<boolean> {
    return this.mutedMentionsNow(uid);
  }

  /** The setting now, for the engine's reads of the user (pull, userState): in the same step as the records. */
  mutedMentionsNow(uid: string): boolean {
    return this.mentionedWhenMuted.has(uid);
  }

  async setMutedMentions(uid: string, on: boolean): Promise<void> {
    if (on) this.mentionedWhenMuted.add(uid);
    else this.mentionedWhenMuted.delete(uid);
  }

  async announce(changes: readonly ReadsChange[]): Promise<void> {
    for (const change of changes) this.notifications.reads(change);
  }

  /** Every register, for the durable tier's tests and the operator (a copy). */
  snapshot(): Map<string, Map<string, number>> {
    return new Map([...this.registers].map(([conv, r]) => [conv, new Map(r)]));
  }
}
