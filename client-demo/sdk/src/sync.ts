import type { ErrorCode } from '../../../protocol/errors.js';
import type { AckFrame, ChangeFrame, ClientFrame, ErrorFrame, ServerFrame, SyncFrame, VersionFrame } from '../../../protocol/frames.js';
import { UNSEEN_EPOCH } from '../../../protocol/types.js';
import type { Backoff } from './backoff.js';
import { HeldHeads } from './held-heads.js';
import type { ReadBatcher } from './read-batcher.js';
import type { ReceiptsView } from './receipts.js';
import type { PushSequencer } from './sequencer.js';
import type { SettingsQueue } from './settings-queue.js';
import type { ConvStore } from './store.js';
import { Timer, type Timers } from './timers.js';
import type { ResetEvent } from './types.js';

/** Error codes after which the same request may succeed later. */
const TRANSIENT: ReadonlySet<string> = new Set<ErrorCode>(['unavailable', 'outcome_unknown', 'rate_limited', 'internal']);

export interface SyncDeps {
  store: ConvStore;
  /** Read receipts (peers' positions): refreshed by pulls and `reads` frames. */
  receipts: ReceiptsView;
  /** Read receipts of `conv` changed. */
  receiptsChanged(conv: string): void;
  pushes: PushSequencer;
  reads: ReadBatcher;
  settings: SettingsQueue;
  timers: Timers;
  /** How long a push past a gap waits for the missing version before the client pulls. */
  gapWaitMs: number;
  /** Delays between pulls the server refused (grows while they keep failing). */
  pullBackoff: Backoff;
  /** Sends a request on the welcomed socket; null when there is none. */
  request(frame: (id: number) => ClientFrame): number | null;
  /** A pull completed on this connection. */
  confirmed(): void;
  /** A reply of another epoch replaced the state (see ResetEvent). */
  reset(event: ResetEvent): void;
  changed(): void;
  error(err: Error): void;
}

/**
 * What each server frame does to the client, per connection: pulls (one at a time), push
 * ordering, acks and errors of reads and settings. Rules from PROTOCOL.md:
 * - a push is applied only as the next version; a duplicate is ignored (not a reason to pull);
 *   a gap waits `gapWaitMs` for the missing versions, then pulls;
 * - an ack names the version that includes the change: if the pushes up to it do not come
 *   within the gap wait, pull;
 * - an error without an id, after welcome and before the first sync, means the sync answering
 *   hello failed: pull, with backoff.
 */
export class SyncSession {
  /** Request id of the pull in flight; 0 while waiting for the sync that answers hello. */
  pullId: number | null = null;
  /** A pull completed on the current connection: the numbers are confirmed, not stale. */
  confirmed = false;
  private pullAgain = false;
  /**
   * Head pushes that arrived while the pull in flight was unanswered: its reply may have been
   * read before them, and one of another epoch replaces the heads and extras wholesale, so they
   * are applied again after it (max-registers and unions: again changes nothing otherwise).
   * Merged per conversation as they come (HeldHeads).
   */
  private readonly headsDuringPull = new HeldHeads();
  private readonly gapTimer: Timer;
  private readonly pullRetryTimer: Timer;

  constructor(private readonly deps: SyncDeps) {
    this.gapTimer = new Timer(deps.timers, () => this.onGapTimeout());
    this.pullRetryTimer = new Timer(deps.timers, () => this.pull());
  }

  /** Versions known to exist have not arrived. */
  get gap(): boolean {
    const cursor = this.deps.store.cursor;
    return cursor !== null && this.deps.pushes.behind(cursor);
  }

  welcomed(uid: string): void {
    const { store, reads, pushes, settings } = this.deps;
    if (store.uid !== null && store.uid !== uid) {
      store.clear();
      this.deps.receipts.clear();
      reads.clear();
      pushes.clear();
    }
    store.uid = uid;
    // The server answers hello with a sync page, like a pull.
    this.pullId = 0;
    this.pullAgain = false;
    reads.flush();
    settings.flush();
    this.deps.changed();
  }

  frame(frame: ServerFrame): void {
    switch (frame.t) {
      case 'sync':
        return this.onSync(frame);
      case 'change':
        return this.onChange(frame);
      case 'head':
        if (this.pullId !== null) this.headsDuringPull.add(frame);
        // A head for a row not held as read-diffused: the client is behind (or the push is late); a pull settles which.
        if (!this.deps.store.applyHead(frame)) this.pull();
        return this.deps.changed();
      case 'reads':
        this.deps.receipts.applyReads(frame.conv, frame.members, frame.reads);
        return this.deps.receiptsChanged(frame.conv);
      case 'version':
        return this.onVersion(frame);
      case 'ack':
        return this.onAck(frame);
      case 'error':
        return this.onError(frame);
      case 'welcome':
        return;
    }
  }

  /** Pulls from the cursor (or from scratch), unless a pull is in flight: then once more after it. */
  pull(fromScratch = false): void {
    this.pullRetryTimer.cancel();
    if (this.pullId !== null) {
      this.pullAgain = true;
      return;
    }
    const since = fromScratch ? null : this.deps.store.cursor;
    const id = this.deps.request((id) => ({ t: 'pull', id, ...(since ? { since } : {}) }));
    if (id === null) return;
    this.gapTimer.cancel();
    this.pullId = id;
    this.deps.changed();
  }

  /** The socket is gone: whatever was in flight may not have arrived. */
  down(): void {
    this.pullId = null;
    this.pullAgain = false;
    this.headsDuringPull.clear();
    this.confirmed = false;
    this.gapTimer.cancel();
    this.pullRetryTimer.cancel();
    this.deps.pushes.clear();
    this.deps.reads.disconnected();
    this.deps.settings.disconnected();
  }

  private onSync(frame: SyncFrame): void {
    // Peers' read positions are read with the reply, not part of the stream: taken from any reply.
    for (const conv of this.deps.receipts.applyPeers(frame.peerReads)) this.deps.receiptsChanged(conv);
    if (this.pullId === null || (frame.id ?? 0) !== this.pullId) return;
    this.pullId = null;
    const before = this.deps.store.cursor;
    const outcome = this.deps.store.applyReply(frame);
    // A head for a row still not held asked for a pull when it came (pullAgain): nothing more to do here.
    if (outcome !== 'restart') for (const head of this.headsDuringPull.frames()) this.deps.store.applyHead(head);
    // The next reply is read after them.
    this.headsDuringPull.clear();
    if (outcome === 'restart') return this.pull(true);
    if (outcome === 'applied' && before && before.epoch !== frame.epoch && before.epoch !== UNSEEN_EPOCH) {
      this.deps.reset({ from: before, to: { epoch: frame.epoch, version: frame.version } });
    }
    if (frame.more) return this.pull();
    this.confirmed = true;
    this.deps.pullBackoff.reset();
    this.deps.confirmed();
    this.applyPushes();
    if (this.pullAgain) {
      this.pullAgain = false;
      this.pull();
    }
  }

  private onChange(change: ChangeFrame): void {
    const { store, pushes } = this.deps;
    const cursor = store.cursor;
    if (this.pullId !== null || !cursor) {
      pushes.add(change);
      return;
    }
    // Another history (the server lost its state): only a snapshot can continue from here.
    if (change.epoch !== cursor.epoch) return this.pull();
    if (change.v <= cursor.version) return;
    pushes.add(change);
    this.applyPushes();
  }

  private onVersion(frame: VersionFrame): void {
    const { store } = this.deps;
    const cursor = store.cursor;
    // Heads of read-diffused groups are not in the stream, so no version reveals a lost `head`
    // push: a member of such a group re-reads them with a (cheap, empty) delta pull.
    if (!cursor || frame.epoch !== cursor.epoch || frame.version > cursor.version || store.hasLargeGroups) this.pull();
  }

  private onAck(frame: AckFrame): void {
    const { store, reads, settings, pushes } = this.deps;
    const cursor = { epoch: frame.epoch, version: frame.version };
    const rejected = new Set((frame.rejected ?? []).map((r) => r.conv));
    const batch = reads.ack(frame.id);
    for (const [conv, seq] of batch ?? []) {
      if (rejected.has(conv)) store.dropRead(conv);
      else store.ackRead(conv, seq, cursor);
    }
    if (!batch) {
      const conv = settings.ack(frame.id);
      // The overlay shows every change of `conv` this device made: it lasts until the last one is in.
      if (conv !== undefined && !settings.pendingFor(conv)) store.ackSettings(conv, cursor);
    }
    // The ack names the version that includes this change: if the push for it never comes, pull.
    const mine = store.cursor;
    if (!mine) return this.deps.changed();
    if (mine.epoch !== frame.epoch) return this.pull();
    pushes.expect(cursor);
    this.applyPushes();
  }

  private onError(frame: ErrorFrame): void {
    const { store, reads, settings } = this.deps;
    const id = frame.id;
    const transient = TRANSIENT.has(frame.code);
    if (id === undefined) {
      // The sync that answers hello failed ("pull to retry").
      if (this.pullId === 0) this.retryPullLater();
    } else if (id === this.pullId) {
      this.retryPullLater();
    } else if (reads.owns(id)) {
      // A passing failure is sent again after retryMs; a refused batch will never apply.
      if (transient) reads.retry(id);
      else for (const [conv] of reads.ack(id) ?? []) store.dropRead(conv);
    } else if (settings.owns(id)) {
      // Likewise for settings; a refused one also takes its optimistic change back.
      if (transient) settings.retry(id);
      else {
        const conv = settings.fail(id, new Error(`${frame.code}: ${frame.message}`));
        if (conv !== undefined) store.dropSettings(conv);
      }
    }
    this.deps.error(new Error(`server error ${frame.code}: ${frame.message}`));
    this.deps.changed();
  }

  private retryPullLater(): void {
    this.pullId = null;
    this.headsDuringPull.clear();
    this.pullRetryTimer.rearm(this.deps.pullBackoff.next());
  }

  /** Applies waiting pushes that continue the cursor; a gap that remains gets `gapWaitMs` to fill. */
  private applyPushes(): void {
    const { store, pushes } = this.deps;
    const cursor = store.cursor;
    if (cursor) {
      for (const change of pushes.take(cursor)) store.applyChange(change);
      if (pushes.behind(store.cursor ?? cursor)) this.gapTimer.arm(this.deps.gapWaitMs);
      else this.gapTimer.cancel();
    }
    this.deps.changed();
  }

  private onGapTimeout(): void {
    const cursor = this.deps.store.cursor;
    if (!cursor || this.deps.pushes.behind(cursor)) this.pull();
  }
}
