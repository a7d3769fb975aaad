import { LIMITS } from '../../protocol/limits.js';
import { RedpointError } from '../../protocol/errors.js';
import type { Cursor, MessageEvent, PullReply, UnreadSummary } from '../../protocol/types.js';
import { summarize, toView } from '../../protocol/view.js';
import type { Engine, UserOp, UserOpResult } from '../engine/engine.js';
import { SyncEvents } from './events.js';
import { Ingest } from './ingest.js';
import { changeMembership, type MembershipChange, type MembershipResult } from './membership.js';
import { FlushGate } from './flush-gate.js';

export interface BatchResult {
  epoch: string;
  version: number;
  rejected: string[];
}

/** Enough to overlap the two round trips of a flush with others; more only adds contention. */
const DEFAULT_FLUSHES_IN_FLIGHT = 4;

export interface SyncOptions {
  largeGroupThreshold: number;
  /** Message flushes allowed in flight at once (group commit merges the rest). */
  maxFlushesInFlight?: number;
}

/**
 * The use cases of Redpoint on top of an Engine: ingest, membership, per-user changes, pull and
 * the unread summary. Emits every change through `events` for the push side.
 */
export class SyncService {
  readonly events = new SyncEvents();
  readonly ingest: Ingest;
  private readonly gate = new FlushGate();
  /** Store latency of the calls behind pulls and unread summaries (ingest reports through `ingest.onFlush`). */
  onStoreCall: ((op: 'pull' | 'user_state' | 'read', seconds: number) => void) | undefined;
  /** Conversations are never deleted through the API; a store that lost one evicts it (postMessages). */
  private readonly knownConversations = new Set<string>();

  constructor(
    readonly engine: Engine,
    private readonly options: SyncOptions,
  ) {
    this.ingest = new Ingest(engine, this.gate, this.events, options.maxFlushesInFlight ?? DEFAULT_FLUSHES_IN_FLIGHT);
  }

  /** Applies messages; resolves once they are in the store. Unknown conversations → nothing applied. */
  async postMessages(messages: readonly MessageEvent[]): Promise<void> {
    await this.requireConversations(messages.map((m) => m.conv));
    try {
      await this.ingest.submit(messages);
    } catch (err) {
      // The store no longer knows a conversation the cache does (it lost data): check again next time.
      if (err instanceof RedpointError && err.code === 'unknown_conversation') {
        for (const m of messages) this.knownConversations.delete(m.conv);
      }
      throw err;
    }
  }

  async changeMembers(conv: string, change: MembershipChange): Promise<MembershipResult> {
    const overlap = change.add.filter((uid) => change.remove.includes(uid));
    if (overlap.length > 0) throw new RedpointError('invalid_request', `both added and removed: ${overlap.join(', ')}`);
    const result = await changeMembership(this.engine, this.gate, this.options.largeGroupThreshold, conv, change);
    this.knownConversations.add(conv);
    this.emitChanges(result.ops, result.results);
    return result;
  }

  async read(uid: string, conv: string, seq: number): Promise<UserOpResult> {
    return this.applyMemberOp({ type: 'read', uid, conv, seq });
  }

  /**
   * A batch of reads from one device, applied in one round trip. Conversations the user is not a
   * member of are reported back, not applied.
   */
  async readBatch(uid: string, reads: ReadonlyArray<readonly [string, number]>): Promise<BatchResult> {
    const ops: UserOp[] = reads.map(([conv, seq]) => ({ type: 'read', uid, conv, seq }));
    const started = performance.now();
    const results = await this.engine.applyUserOps(ops);
    this.onStoreCall?.('read', (performance.now() - started) / 1000);
    this.emitChanges(ops, results);
    const rejected = ops.filter((_, i) => !results[i]?.member).map((op) => op.conv);
    // Every result, no-op or not, reports the user's version after it: the last one is the
    // cursor after the batch (ops on one user run in order), with no extra round trip.
    const last = results.at(-1);
    if (!last) return this.engine.position(uid).then((p) => ({ ...p, rejected }));
    return { epoch: last.epoch, version: Math.max(...results.map((r) => r.version)), rejected };
  }

  async position(uid: string): Promise<Cursor> {
    return this.engine.position(uid);
  }

  async deleteConversation(uid: string, conv: string): Promise<UserOpResult> {
    const info = await this.engine.getConversation(conv);
    if (!info) throw unknownConversation(conv);
    return this.applyMemberOp({ type: 'delete', uid, conv, head: info.maxSeq });
  }

  async updateSettings(uid: string, conv: string, settings: { muted?: boolean; markedUnread?: boolean }): Promise<UserOpResult> {
    return this.applyMemberOp({ type: 'settings', uid, conv, ...settings });
  }

  async pull(uid: string, since: Cursor | null, limit: number = LIMITS.pullPageDefault): Promise<PullReply> {
    const started = performance.now();
    const stored = await this.engine.pull(uid, since, Math.min(Math.max(1, limit), LIMITS.pullPageMax));
    this.onStoreCall?.('pull', (performance.now() - started) / 1000);
    const heads = await this.engine.heads(stored.largeConvs);
    const { largeConvs: _ignored, ...rest } = stored;
    return { ...rest, heads };
  }

  /** The badge numbers. `total` = stored totals (write-diffused) + read-diffused groups summed now. */
  async unread(uid: string): Promise<UnreadSummary> {
    const started = performance.now();
    const stored = await this.engine.userState(uid);
    this.onStoreCall?.('user_state', (performance.now() - started) / 1000);
    const heads = await this.engine.heads(stored.states.filter((s) => s.large).map((s) => s.conv));
    const summary = summarize(uid, stored.epoch, stored.version, stored.states, heads);
    let total = stored.totals.total;
    let mentions = stored.totals.mentions;
    const categories = { ...stored.totals.categories };
    for (const state of stored.states) {
      const view = state.large ? toView(state, heads) : null;
      if (!view || view.muted) continue;
      total += view.unread;
      mentions += view.mentions;
      if (view.unread > 0) categories[view.category] = (categories[view.category] ?? 0) + view.unread;
    }
    return { ...summary, total, mentions, categories };
  }

  /** Waits for in-flight flushes (graceful shutdown). */
  async idle(): Promise<void> {
    await this.ingest.idle();
    await this.gate.idle();
  }

  private async applyMemberOp(op: UserOp): Promise<UserOpResult> {
    const [result] = await this.engine.applyUserOps([op]);
    if (!result?.member) throw unknownConversation(op.conv);
    this.emitChanges([op], [result]);
    return result;
  }

  private emitChanges(ops: readonly UserOp[], results: readonly UserOpResult[]): void {
    ops.forEach((op, i) => {
      const r = results[i];
      if (r?.changed) this.events.emitUser({ uid: op.uid, conv: op.conv, epoch: r.epoch, version: r.version, state: r.state });
    });
  }

  private async requireConversations(convs: readonly string[]): Promise<void> {
    const unknown = [...new Set(convs)].filter((c) => !this.knownConversations.has(c));
    const infos = await Promise.all(unknown.map((c) => this.engine.getConversation(c)));
    const missing = unknown.filter((c, i) => {
      if (infos[i]) this.knownConversations.add(c);
      return !infos[i];
    });
    if (missing.length > 0) throw unknownConversation(missing.join(', '));
  }
}

function unknownConversation(conv: string): RedpointError {
  return new RedpointError('unknown_conversation', `unknown conversation: ${conv}`);
}
