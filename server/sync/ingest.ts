import type { MessageEvent } from '../../protocol/types.js';
import type { Engine, MessageRecord, RecordedMessage } from '../engine/engine.js';
import { mergeOps } from '../engine/merge-ops.js';
import { afterPartOfIt } from '../engine/store-errors.js';
import { unknownConversation } from './conversation-errors.js';

interface Submission {
  messages: readonly MessageEvent[];
  /** Mention entries it carries (the flush budget counts them). */
  weight: number;
  /** Arrival time, carried to pushes for the push-lag metric. */
  at: number;
  resolve(): void;
  reject(err: unknown): void;
}

export interface FlushStats {
  messages: number;
  conversations: number;
  userOps: number;
  /** Store round trips of the flush: raising the conversations' heads, then the per-user ops. */
  recordSeconds: number;
  applySeconds: number;
  /** The store did both in one step (Engine.recordAndApply): recordSeconds holds it all. */
  oneStep: boolean;
}

/**
 * Bounds on one flush: group commit merges whatever is queued, but never more than this, so a
 * burst cannot build an unbounded op (the rest waits for the next flush).
 */
export const FLUSH_LIMITS = { messages: 10_000, weight: 200_000 } as const;

/**
 * Message ingest with group commit: up to `maxInFlight` flushes run at once (each is one or two
 * store round trips, so a few in flight keep the store busy); while all are busy, new submissions
 * queue up and the next flush merges them — per (user, conversation) into ONE op carrying the max
 * seqs. No timer: a flush starts at the end of the event-loop turn the submission came in
 * (setImmediate), so every request read in one turn goes into one flush rather than the first
 * few each taking a flush of their own; under load each flush carries more. A submission
 * resolves only once its messages are applied in the store.
 *
 * Stateless across processes: nothing here orders anything against another process. A flush is
 * a conversation step per conversation (raise the head, read who is a member, atomically) and
 * then one user step per user (a store with Engine.recordAndApply does both in one call); a
 * membership change by another process in between is reconciled by the rules (rules.ts:
 * pending records, generations).
 */
export class Ingest {
  private pending: Submission[] = [];
  private inFlight = 0;
  private pumpScheduled = false;
  private readonly drained: Array<() => void> = [];
  onFlush: ((stats: FlushStats) => void) | undefined;

  constructor(
    private readonly engine: Engine,
    private readonly maxInFlight: number,
  ) {}

  submit(messages: readonly MessageEvent[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const weight = messages.reduce((n, m) => n + 1 + (m.mentions?.length ?? 0), 0);
      this.pending.push({ messages, weight, at: wallClockMs(), resolve, reject });
      if (this.pumpScheduled) return;
      this.pumpScheduled = true;
      setImmediate(() => {
        this.pumpScheduled = false;
        this.pump();
      });
    });
  }

  /** Resolves once every submission so far is flushed (graceful shutdown). */
  idle(): Promise<void> {
    if (this.inFlight === 0 && this.pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  private pump(): void {
    while (this.pending.length > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.take();
      this.inFlight += 1;
      this.flush(batch)
        .catch((err: unknown) => {
          for (const s of batch) s.reject(err);
        })
        .finally(() => {
          this.inFlight -= 1;
          this.pump();
          if (this.inFlight === 0 && this.pending.length === 0) {
            for (const wake of this.drained.splice(0)) wake();
          }
        });
    }
  }

  /** The queued submissions that fit one flush (always at least one). */
  private take(): Submission[] {
    let messages = 0;
    let weight = 0;
    let n = 0;
    for (const s of this.pending) {
      if (n > 0 && (messages + s.messages.length > FLUSH_LIMITS.messages || weight + s.weight > FLUSH_LIMITS.weight)) break;
      messages += s.messages.length;
      weight += s.weight;
      n += 1;
    }
    return this.pending.splice(0, n);
  }

  private async flush(batch: Submission[]): Promise<void> {
    const started = performance.now();
    // A request naming an unknown conversation is refused whole. One naming a single conversation
    // learns it from the record step itself (which creates nothing); only requests that name
    // several need asking first, before any head moves.
    const multi = new Set<string>();
    for (const s of batch) {
      if (s.messages.length < 2) continue; // one message names one conversation: no Set for it
      const convs = new Set(s.messages.map((m) => m.conv));
      if (convs.size > 1) for (const c of convs) multi.add(c);
    }
    const missing = new Set(multi.size > 0 ? await this.engine.missingConversations([...multi]) : []);
    const live: Submission[] = missing.size === 0 ? batch : [];
    if (missing.size > 0) {
      for (const s of batch) {
        if (s.messages.some((m) => missing.has(m.conv))) refuse(s, missing);
        else live.push(s);
      }
    }
    if (live.length === 0) return;

    const messages = live.length === 1 ? (live[0] as Submission).messages : live.flatMap((s) => s.messages);
    let at = Number.POSITIVE_INFINITY;
    for (const s of live) at = Math.min(at, s.at);
    const heads = new Map<
      string,
      { seq: number; candidates: Set<string>; at?: number; mentionAll?: number[]; nocount?: number[]; mentioned?: [string, number][] }
    >();
    for (const m of messages) {
      let h = heads.get(m.conv);
      if (!h) heads.set(m.conv, (h = { seq: 0, candidates: new Set() }));
      h.seq = Math.max(h.seq, m.seq);
      h.candidates.add(m.sender);
      if (m.mentions) for (const uid of m.mentions) h.candidates.add(uid);
      // Issue 43: what a read-diffused conversation keeps beside its head (MessageRecord).
      if (m.at !== undefined) h.at = Math.max(h.at ?? 0, m.at);
      // A non-counting message's @all is ignored (issue 43).
      if (m.mentionAll === true && m.counts !== false) (h.mentionAll ??= []).push(m.seq);
      // Issue 43: what stops counting, and whom a counting message mentions (a read-diffused
      // conversation's index: a later recall drops exactly those mentions).
      if (m.counts === false) (h.nocount ??= []).push(m.seq);
      if (m.recalls !== undefined && m.recalls.length > 0) (h.nocount ??= []).push(...m.recalls);
      if (m.counts !== false && m.mentionAll !== true && m.mentions !== undefined)
        for (const uid of m.mentions) if (uid !== m.sender) (h.mentioned ??= []).push([uid, m.seq]);
    }
    const convs = [...heads.keys()];
    const items = convs.map((conv): MessageRecord => {
      const h = heads.get(conv);
      if (!h) return { conv, seq: 0, candidates: [] };
      return {
        conv,
        seq: h.seq,
        candidates: [...h.candidates],
        ...(h.at !== undefined ? { at: h.at } : {}),
        ...(h.mentionAll !== undefined ? { mentionAll: h.mentionAll } : {}),
        ...(h.nocount !== undefined ? { nocount: h.nocount } : {}),
        ...(h.mentioned !== undefined ? { mentioned: h.mentioned } : {}),
      };
    });
    // A store that does the whole flush in one step (RedisEngine on one Redis) is given it whole.
    const whole = this.engine.recordAndApply ? await this.engine.recordAndApply(items, messages, at) : undefined;
    const recorded = whole ? whole.recorded : await this.engine.recordMessages(items, at);
    const byConv = new Map<string, RecordedMessage>();
    const lost = new Set<string>();
    convs.forEach((conv, i) => {
      const r = recorded[i];
      if (r) byConv.set(conv, r);
      else lost.add(conv);
    });
    const recordedAt = performance.now();
    let userOps = whole?.userOps ?? 0;
    if (!whole) {
      const ops = mergeOps(messages, byConv);
      userOps = ops.length;
      // The heads moved already: a failure from here on leaves the messages half applied.
      await this.engine.applyUserOps(ops, { at, results: false }).catch((err: unknown) => {
        throw afterPartOfIt(err);
      });
    }
    const appliedAt = performance.now();
    for (const s of live) {
      // A conversation that vanished between the check and the record step (deleted, or lost by
      // the store) fails only the requests naming it.
      if (lost.size > 0 && s.messages.some((m) => lost.has(m.conv))) refuse(s, lost);
      else s.resolve();
    }
    this.onFlush?.({
      messages: messages.length,
      conversations: convs.length,
      userOps,
      oneStep: whole !== undefined,
      recordSeconds: (recordedAt - started) / 1000,
      applySeconds: (appliedAt - recordedAt) / 1000,
    });
  }
}

function refuse(submission: Submission, unknown: ReadonlySet<string>): void {
  const names = [...new Set(submission.messages.map((m) => m.conv))].filter((conv) => unknown.has(conv));
  submission.reject(unknownConversation(names));
}

/** Milliseconds since the Unix epoch with sub-ms precision, comparable across processes on one host. */
export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}
