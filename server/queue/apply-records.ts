import type { SeqGuard } from '../sync/seq-guard.js';
import type { SyncService } from '../sync/sync-service.js';
import { isPermanent, isStoreTrouble, type Outcome, reasonOf, retryDelay } from './outcome.js';
import { commutes, conversationOf, type QueueRecord } from './record.js';

/** Where records are applied: the same SyncService (and its group commit) as HTTP ingest. */
export interface RecordTarget {
  sync: SyncService;
  /** MAX_SEQ_JUMP, checked before a message applies, as for `POST /v1/messages`. */
  seqGuard?: SeqGuard | undefined;
  /** Messages applied (the `redpoint_ingest_messages_total` HTTP ingest also counts). */
  onMessages?: ((n: number) => void) | undefined;
}

export interface RecordToApply {
  record: QueueRecord;
  /** Times it was tried before (0 on its first delivery). */
  attempts: number;
}

/** An outcome, or `store`: the store did not answer, nothing is known to be final. */
export type Attempt = { kind: 'done'; outcome: Outcome } | { kind: 'store'; err: unknown };

/**
 * Applies a batch, all at once so that its messages share one group-commit flush with each other
 * and with HTTP requests in flight. Within one conversation the queue's order holds where it
 * matters: a record that does not commute (membership, settings, delete) waits for every record
 * of its conversation before it, and the records after it wait for it; messages and reads between
 * two such records run together. `retryBudgetMs` bounds how long a record naming an unknown
 * conversation (or hitting an unexpected error) is retried before it is dead-lettered.
 */
export async function applyRecords(target: RecordTarget, items: readonly RecordToApply[], retryBudgetMs: number): Promise<Attempt[]> {
  const chains = new Map<string, { barrier: Promise<Attempt | undefined>; since: Promise<Attempt>[] }>();
  const runs = items.map((item) => {
    const conv = conversationOf(item.record);
    let chain = chains.get(conv);
    if (!chain) chains.set(conv, (chain = { barrier: Promise.resolve(undefined), since: [] }));
    // A barrier the store did not apply holds what comes after it in its conversation: the
    // consumer tries them again together, in the same order.
    const behind = (before: Attempt | undefined): Promise<Attempt> =>
      before?.kind === 'store' ? Promise.resolve({ kind: 'store', err: before.err }) : attempt(target, item, retryBudgetMs);
    let run: Promise<Attempt>;
    if (commutes(item.record)) {
      run = chain.barrier.then(behind);
      chain.since.push(run);
    } else {
      const before = [chain.barrier, ...chain.since];
      run = Promise.all(before).then((done) => behind(done.find((a) => a?.kind === 'store')));
      chain.barrier = run;
      chain.since = [];
    }
    return run;
  });
  return Promise.all(runs);
}

async function attempt(target: RecordTarget, item: RecordToApply, retryBudgetMs: number): Promise<Attempt> {
  try {
    await apply(target, item.record);
    return { kind: 'done', outcome: { kind: 'applied' } };
  } catch (err) {
    if (isStoreTrouble(err)) return { kind: 'store', err };
    const reason = reasonOf(err);
    if (isPermanent(err)) return { kind: 'done', outcome: { kind: 'dead', reason } };
    // unknown_conversation (its membership record may be behind it) or an unexpected error.
    const delayMs = retryDelay(item.attempts + 1, retryBudgetMs);
    if (delayMs === null) return { kind: 'done', outcome: { kind: 'dead', reason: `${reason} (retried ${item.attempts} times)` } };
    return { kind: 'done', outcome: { kind: 'retry', reason, delayMs } };
  }
}

async function apply({ sync, seqGuard, onMessages }: RecordTarget, record: QueueRecord): Promise<void> {
  switch (record.type) {
    case 'message': {
      if (seqGuard?.enabled) await seqGuard.check([record.message]);
      await sync.postMessages([record.message]);
      onMessages?.(1);
      return;
    }
    case 'members':
      await sync.changeMembers(record.conv, {
        add: record.add,
        remove: record.remove,
        ...(record.category !== undefined ? { category: record.category } : {}),
      });
      return;
    case 'read':
      await sync.read(record.uid, record.conv, record.seq, record.gen);
      return;
    case 'settings':
      await sync.updateSettings(record.uid, record.conv, {
        ...(record.muted !== undefined ? { muted: record.muted } : {}),
        ...(record.level !== undefined ? { level: record.level } : {}),
        ...(record.markedUnread !== undefined ? { markedUnread: record.markedUnread } : {}),
      });
      return;
    case 'delete':
      await sync.deleteConversation(record.uid, record.conv);
      return;
  }
}
