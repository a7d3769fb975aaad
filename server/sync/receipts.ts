import { RedpointError } from '../../protocol/errors.js';
import type { Engine } from '../engine/engine.js';
import type { ReadsChange } from '../engine/notifications.js';
import type { ReadPositions } from '../engine/read-positions.js';
import { afterPartOfIt } from '../engine/store-errors.js';
import { Coalescer } from './coalescer.js';
import { unknownConversation } from './conversation-errors.js';

export interface ReceiptsOptions {
  /** RECEIPTS_PUSH_INTERVAL_MS: at most one `reads` announcement per conversation per this long (per process). */
  pushIntervalMs: number;
  /** RECEIPTS_DETAIL_MEMBERS: conversations of at most this many members list who read; larger ones only count. */
  detailMembers: number;
}

export const DEFAULT_RECEIPTS_OPTIONS: ReceiptsOptions = { pushIntervalMs: 1000, detailMembers: 30 };

/** One seq's receipt: how many other members have read it, and who when the conversation is small enough. */
interface SeqReceipt {
  seq: number;
  count: number;
  readers?: string[];
}

export interface ConvReceipts {
  conv: string;
  members: number;
  large: boolean;
  seqs: SeqReceipt[];
}

/**
 * Read receipts (issue 44, PROTOCOL.md "Read receipts"): the members' read positions per
 * conversation, kept in the store's registers (../engine/read-positions.ts), apart from the user
 * records. A user's register is raised AFTER their user step raised their readSeq, as a separate
 * step (on a Cluster another slot): a crash between the two loses that receipt until the user's
 * next read of the conversation (each read raises the register again, changed or not). It only
 * rises ("has seen up to"): a later unread-from-here does not un-see.
 *
 * Privacy: a user with `shareReads` false is never recorded, and sees no one else's. Turning it
 * off writes the setting, then drops the user's positions from each of their conversations; a
 * raise reads the setting before it writes and again after: if it is off by then it drops what it
 * wrote. Whatever the interleaving, the last of the two to act sees the other's write, so no
 * position of a user who does not share stays.
 */
export class Receipts {
  private readonly positions: ReadPositions;
  private readonly announcer: Coalescer<true>;
  /** conv → whose positions changed since its last announcement (a member is not told of their own). */
  private readonly changed = new Map<string, Set<string>>();
  /** A step after the read failed (the read itself landed): the next read repairs it. */
  onError: ((err: unknown) => void) | undefined;

  constructor(
    private readonly engine: Engine,
    private readonly options: ReceiptsOptions = DEFAULT_RECEIPTS_OPTIONS,
  ) {
    this.positions = engine.readPositions;
    this.announcer = new Coalescer(options.pushIntervalMs, (conv) => {
      this.announce(conv).catch((err: unknown) => this.onError?.(err));
    });
  }

  get pushIntervalMs(): number {
    return this.options.pushIntervalMs;
  }

  /** The user's setting, read now (start it alongside the user step, then hand it to `raise`). */
  async sharing(uid: string): Promise<boolean> {
    const [share = true] = await this.positions.sharing([uid]);
    return share;
  }

  /**
   * After `uid`'s user step: raises their positions to the readSeqs it left. Never throws (the
   * read landed; a failure here is repaired by the next read).
   */
  async raise(uid: string, reads: ReadonlyArray<{ conv: string; seq: number }>, sharing?: Promise<boolean>): Promise<void> {
    if (reads.length === 0) return;
    try {
      if (!(await (sharing ?? this.sharing(uid)))) {
        // A non-sharer has no position: this drops one a turn-off left behind if it died between
        // writing the setting and dropping (setSharing), so the user's next read repairs it.
        await this.positions.drop(
          uid,
          reads.map((r) => r.conv),
        );
        return;
      }
      const rose = await this.positions.raise(reads.map(({ conv, seq }) => ({ conv, uid, seq })));
      // Nothing written (ZADD GT changed nothing): nothing a concurrent turn-off must see undone.
      if (!rose.some(Boolean)) return;
      if (!(await this.sharing(uid))) {
        await this.positions.drop(
          uid,
          reads.map((r) => r.conv),
        );
        return;
      }
      reads.forEach((r, i) => {
        if (rose[i]) this.changedBy(r.conv, uid);
      });
    } catch (err) {
      this.onError?.(err);
    }
  }

  /** The user left these conversations: their positions go (after the leave's conversation step: see reads_raise.lua). */
  async left(conv: string, uids: readonly string[]): Promise<void> {
    await Promise.all(uids.map((uid) => this.positions.drop(uid, [conv])));
    for (const uid of uids) this.changedBy(conv, uid);
  }

  async setSharing(uid: string, share: boolean): Promise<void> {
    await this.positions.setSharing(uid, share);
    // The setting is written: a failure from here on leaves the change half made (outcome unknown: retry).
    await this.applyToPositions(uid, share).catch((err: unknown) => {
      throw afterPartOfIt(err);
    });
  }

  private async applyToPositions(uid: string, share: boolean): Promise<void> {
    const convs = (await this.engine.userState(uid)).states;
    if (!share) {
      await this.positions.drop(
        uid,
        convs.map((s) => s.conv),
      );
      for (const s of convs) this.changedBy(s.conv, uid);
      return;
    }
    // Back on: each conversation's position from the readSeq the user has now.
    await this.raise(
      uid,
      convs.map((s) => ({ conv: s.conv, seq: s.readSeq })),
    );
  }

  /**
   * The peer's position in each one-to-one conversation (exactly 2 members) among `convs`, for a
   * user who shares; nothing for one who does not.
   */
  async peerReads(uid: string, convs: readonly string[], sharing?: Promise<boolean>): Promise<Map<string, number>> {
    if (convs.length === 0 || !(await (sharing ?? this.sharing(uid)))) return new Map();
    return this.positions.peers(uid, convs);
  }

  /** For each seq: how many members other than `uid` have read it, and who (conversations within detailMembers). */
  async readBy(uid: string, conv: string, ask: { seqs: readonly number[] } | { latest: number }): Promise<ConvReceipts> {
    if (!(await this.sharing(uid)))
      throw new RedpointError('forbidden', 'this user does not share read positions (shareReads false), so sees no one else’s: PUT /v1/users/{uid}/settings');
    const detail = { upTo: this.options.detailMembers, member: uid };
    let seqs = 'seqs' in ask ? [...ask.seqs] : [];
    let reads = (await this.positions.read([conv], { ...detail, seqs })).get(conv);
    if (reads && 'latest' in ask) {
      // The latest messages: the head read first, then the counts of the seqs below it.
      const head = reads.maxSeq;
      seqs = [];
      for (let seq = head; seq >= 1 && seqs.length < ask.latest; seq--) seqs.push(seq);
      seqs.reverse();
      reads = (await this.positions.read([conv], { ...detail, seqs })).get(conv);
    }
    if (!reads) throw unknownConversation([conv]);
    if (!reads.member) throw new RedpointError('not_a_member', `${uid} is not a member of ${conv}`);
    const own = reads.own;
    const listed = !reads.large && reads.memberCount <= this.options.detailMembers;
    return {
      conv,
      members: reads.memberCount,
      large: reads.large,
      seqs: seqs.map((seq, i) => {
        const count = (reads.counts[i] ?? 0) - (own !== null && own >= seq ? 1 : 0);
        if (!listed) return { seq, count };
        const readers = [...reads.positions]
          .filter(([member, at]) => member !== uid && at >= seq)
          .map(([member]) => member)
          .sort();
        return { seq, count, readers };
      }),
    };
  }

  private changedBy(conv: string, uid: string): void {
    let who = this.changed.get(conv);
    if (!who) this.changed.set(conv, (who = new Set()));
    who.add(uid);
    this.announcer.put(conv, true);
  }

  /** Announcements waiting for their conversation's interval to end (tests). */
  get pending(): number {
    return this.announcer.pending;
  }

  close(): void {
    this.announcer.close();
    this.changed.clear();
  }

  /**
   * Tells every sharing member of `conv` (their processes, via the store's notifications) that
   * read positions changed, with the positions as they are NOW: an announcement delayed by the
   * interval carries the latest, never an older one.
   */
  private async announce(conv: string): Promise<void> {
    const changed = this.changed.get(conv) ?? new Set<string>();
    this.changed.delete(conv);
    // Only conversations that list who read are pushed: a larger one would cost a push per member
    // per interval; its members ask GET .../reads (PROTOCOL.md).
    const info = await this.engine.getConversation(conv);
    if (!info || info.large || info.memberCount > this.options.detailMembers) return;
    const roster = await this.engine.roster(conv);
    if (!roster) return;
    const uids = roster.members.map((m) => m.uid);
    const [shares, reads] = await Promise.all([this.positions.sharing(uids), this.positions.read([conv], { upTo: this.options.detailMembers })]);
    const listed = reads.get(conv)?.positions ?? new Map<string, number>();
    // Only the positions of members who share now: one left behind by a turn-off that died
    // between its two writes (setSharing) is never shown.
    const members = new Set(uids.filter((_, i) => shares[i]));
    const changes: ReadsChange[] = [];
    uids.forEach((uid, i) => {
      // Not to those who do not share, nor to a member only their own positions changed for.
      if (!shares[i] || (changed.size === 1 && changed.has(uid))) return;
      const others: Record<string, number> = {};
      for (const [member, seq] of listed) if (member !== uid && members.has(member)) Object.defineProperty(others, member, { value: seq, enumerable: true });
      changes.push({ uid, conv, members: roster.info.memberCount, reads: others });
    });
    await this.positions.announce(changes);
  }
}
