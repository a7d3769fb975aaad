import type { ChangeFrame, HeadFrame, SettingsFrame } from '../../../protocol/frames.js';
import type { ConvState, Cursor, PullReply } from '../../../protocol/types.js';
import { byActivity, effectiveLastSeq, summarize } from '../../../protocol/view.js';
import type { CachedState } from './cache/cache.js';
import { KeptExtras } from './head-extras.js';
import { Heads } from './heads.js';
import type { ConversationView, Totals } from './types.js';

/**
 * A local read the server has not shown back yet, with the read generation it was made in.
 * `ack`: the server's cursor once it acknowledged it.
 */
interface ReadOverlay {
  seq: number;
  gen: number;
  ack: Cursor | null;
}

/** A local "unread from here" (seq and its new read generation) the server has not shown back yet. */
interface UnreadOverlay {
  seq: number;
  gen: number;
}

/** What a settings frame changes (mute, mark unread, delete). */
export type SettingsChange = Omit<SettingsFrame, 't' | 'id' | 'conv'>;

interface SettingsOverlay {
  change: SettingsChange;
  /** The last "unread from here" among the changes (they go through the settings queue too). */
  unread?: UnreadOverlay;
  /** For a delete: the effective lastSeq when the user deleted it (hidden up to there). */
  deletedSeq: number;
  ack: Cursor | null;
}

/** What applying a sync page did. */
export type ReplyOutcome =
  /** The page brought the state to its version. */
  | 'applied'
  /** The page was read before pushes this client already applied: only its heads were taken. */
  | 'older'
  /** The page cannot continue this state (no snapshot, and another epoch or no state): pull from scratch. */
  | 'restart';

/**
 * The user's conversations as the server last said (entries are absolute states, so applying one
 * is a plain replace), the read-diffused heads, the cursor, and on top of them the optimistic
 * changes of this device. What a UI sees is server state overlaid with them, where the read
 * position is the larger (readGen, readSeq) of the optimistic one and the server's: a read never
 * lowers it, an "unread from here" (a new generation) may, and so may the server's state (another
 * device's "unread from here" arrives as an entry whose readSeq is lower: it replaces the state).
 *
 * Every collection keyed by a conversation id is a Map: ids such as `__proto__` or
 * `constructor` are valid, and must not meet an object's prototype.
 */
export class ConvStore {
  uid: string | null = null;
  cursor: Cursor | null = null;
  private convs = new Map<string, ConvState>();
  private heads = new Heads();
  /** Issue 43: the read-diffused conversations' last activity, @all and non-counting seqs (PullReply headAt, mentionAll, nocount; `head` pushes). */
  private extras = new KeptExtras();
  /** The user's setting `mutedMentions` (PROTOCOL.md "Notification levels"), from the last reply applied (or the cache). */
  private mentionsWhenMuted = false;
  private readonly reads = new Map<string, ReadOverlay>();
  private readonly settings = new Map<string, SettingsOverlay>();

  get hasData(): boolean {
    return this.cursor !== null;
  }

  /** The user's setting `mutedMentions` as of the last reply applied: what the totals were summed with. */
  get mutedMentions(): boolean {
    return this.mentionsWhenMuted;
  }

  get hasLargeGroups(): boolean {
    for (const s of this.convs.values()) if (s.large) return true;
    return false;
  }

  get overlays(): number {
    return this.reads.size + this.settings.size;
  }

  /** The conversation as this device shows it (server state with the optimistic changes on top). */
  effective(conv: string): ConvState | undefined {
    const server = this.convs.get(conv);
    return server && this.overlaid(server);
  }

  /** The seq a read of `conv` should report: its newest message as far as this client knows. */
  lastSeq(conv: string): number {
    const s = this.convs.get(conv);
    return s ? effectiveLastSeq(s, this.heads.record) : 0;
  }

  /** Drops everything (another user signed in). */
  clear(): void {
    this.cursor = null;
    this.convs = new Map();
    this.heads = new Heads();
    this.extras = new KeptExtras();
    this.mentionsWhenMuted = false;
    this.reads.clear();
    this.settings.clear();
  }

  restore(cached: CachedState): void {
    this.uid = cached.uid;
    this.cursor = cached.cursor;
    this.convs = new Map(cached.convs.map((s) => [s.conv, s]));
    this.heads = new Heads(cached.heads);
    this.extras = new KeptExtras(cached.extras);
    this.mentionsWhenMuted = cached.mutedMentions;
    for (const [conv, seq, gen] of cached.reads) this.optimisticRead(conv, seq, gen ?? this.readGen(conv));
  }

  /** The read generation this device shows for `conv` (its own "unread from here" included): what a read made now carries. */
  readGen(conv: string): number {
    return this.effective(conv)?.readGen ?? 0;
  }

  toCache(reads: Array<[string, number, number]>, savedAt: number): CachedState {
    return {
      format: 3,
      uid: this.uid,
      cursor: this.cursor,
      convs: [...this.convs.values()],
      heads: this.heads.entries(),
      extras: this.extras.entries(),
      mutedMentions: this.mentionsWhenMuted,
      reads,
      savedAt,
    };
  }

  /**
   * Applies a sync page (PROTOCOL.md, "Applying a reply"). A page of this client's epoch may have
   * been read before pushes the client applied since: one older than the client's version
   * changes nothing but the heads, and entries at or below the client's version are skipped. A
   * page of another epoch, or a snapshot when the client has nothing, replaces everything.
   */
  applyReply(reply: PullReply): ReplyOutcome {
    const mine = this.cursor !== null && this.cursor.epoch === reply.epoch ? this.cursor : null;
    if (!mine && !reply.snapshot) return 'restart';
    if (mine && reply.version < mine.version) {
      this.heads.merge(reply.heads);
      this.dropOrphanHeads();
      return 'older';
    }
    let from: number;
    if (reply.snapshot) {
      this.convs = new Map(reply.snapshot.convs.map((s) => [s.conv, s]));
      // Another history: its heads replace ours. The same one: a head push may be newer than these.
      if (!mine) {
        this.heads = new Heads();
        this.extras = new KeptExtras();
      }
      from = reply.snapshot.v;
    } else {
      from = mine?.version ?? 0;
    }
    this.heads.merge(reply.heads);
    this.mentionsWhenMuted = reply.mutedMentions === true;
    // Merged, not replaced: a push read after this reply may already have added to them.
    this.extras.mergeReply(reply);
    for (const entry of reply.entries) {
      if (entry.v <= from) continue;
      this.put(entry.conv, entry.state);
    }
    this.cursor = { epoch: reply.epoch, version: reply.version };
    this.dropOrphanHeads();
    this.retire();
    return 'applied';
  }

  /** The caller has checked that `change.v` is the next version of the current epoch. */
  applyChange(change: ChangeFrame): void {
    this.put(change.conv, change.state);
    this.cursor = { epoch: change.epoch, version: change.v };
    this.retire();
  }

  /**
   * Raises the head; merges the push's time, @all and recalls when this client holds the row as
   * read-diffused. False when it does not (not yet: a topic's first message, a reply that made
   * the user follow, a switch to read diffusion still queued behind a gap or a pull): the caller
   * pulls, since nothing else would bring them before the next pull.
   */
  applyHead(frame: HeadFrame): boolean {
    this.heads.raise(frame.conv, frame.lastSeq);
    if (this.convs.get(frame.conv)?.large !== true) return false;
    this.extras.mergeHead(frame);
    return true;
  }

  optimisticRead(conv: string, seq: number, gen: number): void {
    const current = this.reads.get(conv);
    if (current && !above(gen, seq, current.gen, current.seq)) return;
    const server = this.convs.get(conv);
    if (server && !above(gen, seq, server.readGen ?? 0, server.readSeq)) return;
    this.reads.set(conv, { seq, gen, ack: null });
  }

  /**
   * "Unread from here" on this device: shown at once (readSeq = seq − 1 under generation `gen`)
   * until the server state has that generation or this client reaches the ack's version. Reads
   * of this device made before it are overtaken; it goes through the settings queue, so its ack
   * is ackSettings'.
   */
  optimisticUnreadFrom(conv: string, seq: number, gen: number): void {
    const previous = this.settings.get(conv);
    const read = this.reads.get(conv);
    if (read && read.gen < gen) this.reads.delete(conv);
    // As the server applies it: the "marked unread" dot goes; a flag set after it stays.
    const change: SettingsChange = { ...previous?.change };
    delete change.markedUnread;
    this.settings.set(conv, { change, unread: { seq, gen }, deletedSeq: previous?.deletedSeq ?? -1, ack: null });
  }

  /** The server applied reads up to `seq` as of `cursor`; the overlay lasts until this client reaches it. */
  ackRead(conv: string, seq: number, cursor: Cursor): void {
    const overlay = this.reads.get(conv);
    if (overlay && overlay.seq <= seq) overlay.ack = cursor;
    this.retire();
  }

  dropRead(conv: string): void {
    this.reads.delete(conv);
  }

  optimisticSettings(conv: string, change: SettingsChange): void {
    const previous = this.settings.get(conv);
    const merged = { ...previous?.change, ...change };
    // The server's rule: a delete clears "marked unread"; a flag set after it (or with it) stays.
    if (change.deleted && change.markedUnread === undefined) merged.markedUnread = false;
    this.settings.set(conv, {
      change: merged,
      ...(previous?.unread ? { unread: previous.unread } : {}),
      deletedSeq: change.deleted ? this.lastSeq(conv) : (previous?.deletedSeq ?? -1),
      ack: null,
    });
  }

  /** Call once the last settings request of `conv` this device sent is acknowledged (as of `cursor`). */
  ackSettings(conv: string, cursor: Cursor): void {
    const overlay = this.settings.get(conv);
    if (overlay) overlay.ack = cursor;
    this.retire();
  }

  dropSettings(conv: string): void {
    this.settings.delete(conv);
  }

  /** Visible conversations (with this device's optimistic changes) and the totals derived from them. */
  view(): { conversations: ConversationView[]; totals: Totals } {
    const states: ConvState[] = [];
    for (const s of this.convs.values()) states.push(this.overlaid(s));
    const summary = summarize(
      this.uid ?? '',
      this.cursor?.epoch ?? '',
      this.cursor?.version ?? 0,
      states,
      this.heads.record,
      this.extras.record,
      this.mentionsWhenMuted,
    );
    // The list's order (issue 43): the newest last activity first, then by id, the same on every device.
    const conversations = summary.conversations.sort(byActivity).map((v) => ({ ...v, pending: this.reads.has(v.conv) || this.settings.has(v.conv) }));
    // No prototype: `categories['toString']` is undefined unless a category has that name.
    const categories = Object.assign(Object.create(null) as Record<string, number>, summary.categories);
    return { conversations, totals: { total: summary.total, mentions: summary.mentions, categories } };
  }

  private put(conv: string, state: ConvState | null): void {
    if (state) this.convs.set(conv, state);
    else {
      this.convs.delete(conv);
      this.heads.delete(conv);
    }
    // Back to write diffusion (or gone): the server dropped its @all seqs, the states carry the rest.
    if (state?.large !== true) this.extras.delete(conv);
  }

  /** A head of a conversation the client no longer has means nothing (it would return with a stale value). */
  private dropOrphanHeads(): void {
    this.heads.retain((conv) => this.convs.has(conv));
    this.extras.retain((conv) => this.convs.get(conv)?.large === true);
  }

  private overlaid(server: ConvState): ConvState {
    let s = server;
    const settings = this.settings.get(s.conv);
    const unread = settings?.unread;
    // The server's rule (rules.ts mergeRead): a newer generation sets the position, never below deletedSeq.
    if (unread && unread.gen > (s.readGen ?? 0)) {
      s = { ...s, readGen: unread.gen, readSeq: Math.max(unread.seq - 1, s.deletedSeq, 0), markedUnread: false };
    }
    const read = this.reads.get(s.conv);
    if (read && above(read.gen, read.seq, s.readGen ?? 0, s.readSeq)) s = this.withRead(s, read.seq);
    if (settings) {
      // As the server applies a settings change: the delete first, then the flags.
      const { muted, markedUnread, deleted, level } = settings.change;
      if (deleted && settings.deletedSeq > s.deletedSeq) {
        s = { ...this.withRead(s, Math.max(s.readSeq, settings.deletedSeq)), deletedSeq: settings.deletedSeq };
      }
      // The server's rule (rules.ts): the level wins over muted; muted alone is 'none' or 'all'.
      const next = level ?? (muted === undefined ? undefined : muted ? 'none' : 'all');
      if (next !== undefined) {
        const { level: _old, ...rest } = s;
        s = { ...rest, muted: next === 'none', ...(next === 'mentions' ? { level: 'mentions' as const } : {}) };
      }
      if (markedUnread !== undefined) s = { ...s, markedUnread };
    }
    return s;
  }

  /**
   * A read also clears the "marked unread" dot and the mentions it covers. Which mentions are
   * covered is not known locally: keep at most one per message still unread (the server's count
   * replaces this as soon as it arrives).
   */
  private withRead(s: ConvState, seq: number): ConvState {
    if (seq <= s.readSeq) return s;
    const unreadAfter = Math.max(0, effectiveLastSeq(s, this.heads.record) - seq);
    const read: ConvState = { ...s, readSeq: seq, markedUnread: false, mentions: Math.min(s.mentions, unreadAfter) };
    // Issue 43: which non-counting seqs lie above `seq` is not known locally either; at most one
    // per message still unread (the server's figure replaces it).
    const nocount = Math.min(s.nocount ?? 0, unreadAfter);
    if (nocount > 0) read.nocount = nocount;
    else delete read.nocount;
    return read;
  }

  /** Overlays end once the server state shows them, or once this client reached the ack's version. */
  private retire(): void {
    for (const [conv, overlay] of this.reads) {
      const server = this.convs.get(conv);
      if ((server && !above(overlay.gen, overlay.seq, server.readGen ?? 0, server.readSeq)) || (overlay.ack && this.reached(overlay.ack)))
        this.reads.delete(conv);
    }
    for (const [conv, overlay] of this.settings) {
      if (overlay.ack && this.reached(overlay.ack)) this.settings.delete(conv);
    }
  }

  /** True when this client's state includes `cursor` (or the history it belongs to is gone). */
  private reached(cursor: Cursor): boolean {
    if (!this.cursor) return false;
    return this.cursor.epoch !== cursor.epoch || this.cursor.version >= cursor.version;
  }
}

/** Whether the read position (gen, seq) is above (heldGen, heldSeq), lexicographically (rules.ts mergeRead). */
function above(gen: number, seq: number, heldGen: number, heldSeq: number): boolean {
  return gen > heldGen || (gen === heldGen && seq > heldSeq);
}
