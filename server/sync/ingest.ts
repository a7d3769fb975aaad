import { RedpointError } from '../../protocol/errors.js';
import type { MessageEvent } from '../../protocol/types.js';
import type { Engine, RecordedMessage, UserOp, UserOpResult } from '../engine/engine.js';
import type { FlushGate } from './flush-gate.js';
import type { SyncEvents } from './events.js';

interface Submission {
  messages: readonly MessageEvent[];
  /** Arrival time, carried to pushes for the notify-latency metric. */
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
}

/**
 * Message ingest with group commit: up to `maxInFlight` flushes run at once (each is two store
 * round trips, so a few in flight keep the store busy); while all are busy, new submissions
 * queue up and the next flush merges them all — per (user, conversation) into ONE op carrying the
 * max seqs. No timer: a lone message is flushed at once; under load each flush carries more.
 * A submission resolves only once its messages are applied in the store.
 */
export class Ingest {
  private pending: Submission[] = [];
  private inFlight = 0;
  private readonly drained: Array<() => void> = [];
  onFlush: ((stats: FlushStats) => void) | undefined;

  constructor(
    private readonly engine: Engine,
    private readonly gate: FlushGate,
    private readonly events: SyncEvents,
    private readonly maxInFlight: number,
  ) {}

  submit(messages: readonly MessageEvent[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ messages, at: wallClockMs(), resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.pending.length > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.pending;
      this.pending = [];
      this.inFlight += 1;
      const at = Math.min(...batch.map((s) => s.at));
      this.gate
        .run('shared', () => this.flush(batch.flatMap((s) => s.messages), at))
        .then(
          (unknown) => batch.forEach((s) => settle(s, unknown)),
          (err: unknown) => batch.forEach((s) => s.reject(err)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.pump();
          if (this.inFlight === 0) this.drained.splice(0).forEach((wake) => wake());
        });
    }
  }

  /** Resolves once every submission so far is flushed (graceful shutdown). */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  /**
   * One flush; returns the conversations the store does not know (only their submissions fail:
   * the others in the same flush are applied as usual).
   */
  private async flush(messages: readonly MessageEvent[], at: number): Promise<ReadonlySet<string>> {
    const headByConv = new Map<string, number>();
    for (const m of messages) headByConv.set(m.conv, Math.max(headByConv.get(m.conv) ?? 0, m.seq));
    const convs = [...headByConv.keys()];
    const started = performance.now();
    const recorded = await Promise.all(convs.map((conv) => this.engine.recordMessage(conv, headByConv.get(conv) ?? 0)));
    const byConv = new Map<string, RecordedMessage>();
    const unknown = new Set<string>();
    convs.forEach((conv, i) => {
      const r = recorded[i];
      if (r) byConv.set(conv, r);
      else unknown.add(conv);
    });

    const ops = mergeOps(messages, byConv);
    const recordedAt = performance.now();
    const results = await this.engine.applyUserOps(ops);
    const appliedAt = performance.now();
    this.publish(ops, results, byConv, at);
    this.onFlush?.({
      messages: messages.length,
      conversations: convs.length,
      userOps: ops.length,
      recordSeconds: (recordedAt - started) / 1000,
      applySeconds: (appliedAt - recordedAt) / 1000,
    });
    return unknown;
  }

  private publish(ops: readonly UserOp[], results: readonly UserOpResult[], byConv: Map<string, RecordedMessage>, at: number): void {
    ops.forEach((op, i) => {
      const r = results[i];
      if (r?.changed) this.events.emitUser({ uid: op.uid, conv: op.conv, epoch: r.epoch, version: r.version, state: r.state, at });
    });
    for (const [conv, r] of byConv) {
      if (r.info.large) this.events.emitHead({ conv, maxSeq: r.info.maxSeq, at });
    }
  }
}

function settle(submission: Submission, unknown: ReadonlySet<string>): void {
  const missing = [...new Set(submission.messages.map((m) => m.conv))].filter((conv) => unknown.has(conv));
  if (missing.length === 0) submission.resolve();
  else submission.reject(new RedpointError('unknown_conversation', `unknown conversation: ${missing.join(', ')}`));
}

/** Milliseconds since the Unix epoch with sub-ms precision, comparable across processes on one host. */
export function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

type MessageOp = Extract<UserOp, { type: 'message' }>;

/**
 * One op per (user, conversation) for the whole batch. Write diffusion: every member gets the
 * conversation's newest seq (and only members get ops: the member list was read with the head).
 * Read diffusion: only senders (their own message is read) and mentioned users get a write —
 * O(1) per message whatever the group size; the store ignores those who are not members.
 */
export function mergeOps(messages: readonly MessageEvent[], byConv: ReadonlyMap<string, RecordedMessage>): MessageOp[] {
  const ops = new Map<string, MessageOp & { mentionSeqs: number[] }>();
  const opFor = (uid: string, conv: string): MessageOp & { mentionSeqs: number[] } => {
    const key = `${uid}\u0000${conv}`;
    let op = ops.get(key);
    if (!op) {
      op = { type: 'message', uid, conv, lastSeq: 0, readSeq: 0, mentionSeqs: [] };
      ops.set(key, op);
    }
    return op;
  };
  const memberSets = new Map<string, ReadonlySet<string>>();
  const isMember = (conv: string, members: readonly string[], uid: string): boolean => {
    let set = memberSets.get(conv);
    if (!set) {
      set = new Set(members);
      memberSets.set(conv, set);
    }
    return set.has(uid);
  };
  for (const m of messages) {
    const r = byConv.get(m.conv);
    if (!r) continue;
    const members = r.members;
    if (members) {
      for (const uid of members) {
        const op = opFor(uid, m.conv);
        op.lastSeq = Math.max(op.lastSeq, m.seq);
      }
    }
    if (!members || isMember(m.conv, members, m.sender)) {
      const own = opFor(m.sender, m.conv);
      own.lastSeq = Math.max(own.lastSeq, m.seq);
      own.readSeq = Math.max(own.readSeq, m.seq);
    }
    for (const uid of new Set(m.mentions ?? [])) {
      if (uid === m.sender || (members && !isMember(m.conv, members, uid))) continue;
      const op = opFor(uid, m.conv);
      op.lastSeq = Math.max(op.lastSeq, m.seq);
      op.mentionSeqs.push(m.seq);
    }
  }
  return [...ops.values()];
}
