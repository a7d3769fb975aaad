import { isChildConv, messageConv } from '../../protocol/child-id.js';
import { RedpointError } from '../../protocol/errors.js';
import type { Engine } from '../engine/engine.js';

/**
 * MAX_SEQ_JUMP's default. Far below any id that is not a dense per-conversation seq (a Unix time
 * in seconds is ~1.8e9, in milliseconds ~1.8e12, a snowflake beyond 2^48), yet ten times what one
 * process can have in flight for one conversation between the guard's head read and the apply
 * (INGEST_BATCH's 10,000 at most; ten HTTP batches of 1,000): dense traffic is not refused unless
 * many processes burst into one conversation at once.
 * A jump it lets through costs at most this many phantom unread. docs/configuration.md argues it.
 */
export const DEFAULT_MAX_SEQ_JUMP = 100_000;

export interface SeqJump {
  conv: string;
  seq: number;
  head: number;
  refused: boolean;
}

export interface SeqGuardOptions {
  /** A seq more than this above its conversation's head is a jump (MAX_SEQ_JUMP; 0: no check). */
  maxJump: number;
  /** `refuse`: the request fails with 422 `seq_jump`, nothing applied; `warn`: counted and logged only. */
  action: 'refuse' | 'warn';
  /** How long a head read from the store vouches for later seqs (ms); default HEAD_MEMORY_MS. */
  headMemoryMs?: number;
  /** The clock (tests inject one). */
  now?: () => number;
}

/**
 * A head read from the store is remembered this long: heads only rise, so a remembered head is a
 * lower bound, and a seq within MAX_SEQ_JUMP of it passes without a round trip (dense traffic
 * costs one head read per conversation per this interval, not one per request). The one act that
 * lowers a head, `redpoint rebase`, forgets it in the server thread that served it; other threads
 * (processes, or other WORKERS) may measure from the old head for at most this long (docs/cli.md).
 */
const HEAD_MEMORY_MS = 10_000;
/** At most this many heads remembered; the oldest read is forgotten first. */
const HEADS_REMEMBERED = 100_000;

/**
 * Seq sanity. Seqs are dense per conversation by contract, and unread counts are differences of
 * seqs, so a seq far above the head (a message id passed as a seq: 1, then 1,700,000,000) would
 * make a badge of 1.7 billion that no read short of that seq clears. The guard compares each seq
 * with the conversation's head read just before (one round trip per request, only when on). The
 * head may move in between; a jump is then measured from a head a few messages old, which is
 * what a threshold in the thousands is for. A new conversation's head is 0, so its first seq is
 * measured from 0 like any other: a conversation carried over from another system with its seqs
 * already high gets its head from `redpoint import` (or `PUT /v1/conversations/:conv/head` in
 * steps) before its messages, not from its first message.
 */
export class SeqGuard {
  /** conv -> the head read from the store and when (Map order: oldest read first). */
  private readonly known = new Map<string, { head: number; at: number }>();

  constructor(
    private readonly engine: Pick<Engine, 'heads'>,
    private readonly options: SeqGuardOptions,
    private readonly onJump: (jump: SeqJump) => void,
  ) {}

  /** After a rebase lowered `conv`'s head: measure from the store's head again. */
  forget(conv: string): void {
    this.known.delete(conv);
  }

  get enabled(): boolean {
    return this.options.maxJump > 0;
  }

  /** Throws `seq_jump` (refuse) when any seq jumps; reports every jump either way. */
  async check(items: readonly { conv: string; seq: number; topic?: string }[]): Promise<void> {
    if (!this.enabled || items.length === 0) return;
    const top = new Map<string, number>();
    // A topic's seqs are its own (PROTOCOL.md "Topics"): measured against its conversation's head.
    for (const item of items) {
      const conv = messageConv(item);
      top.set(conv, Math.max(top.get(conv) ?? 0, item.seq));
    }
    const now = (this.options.now ?? Date.now)();
    const memoryMs = this.options.headMemoryMs ?? HEAD_MEMORY_MS;
    const unsure: string[] = [];
    for (const [conv, seq] of top) {
      const known = this.known.get(conv);
      if (!known || now - known.at >= memoryMs || seq - known.head > this.options.maxJump) unsure.push(conv);
    }
    if (unsure.length === 0) return;
    const heads = await this.engine.heads(unsure);
    for (const [conv, head] of heads) {
      this.known.delete(conv);
      this.known.set(conv, { head, at: now });
    }
    while (this.known.size > HEADS_REMEMBERED) {
      const oldest = this.known.keys().next();
      if (oldest.done) break;
      this.known.delete(oldest.value);
    }
    const refuse = this.options.action === 'refuse';
    const jumps: SeqJump[] = [];
    for (const conv of unsure) {
      const seq = top.get(conv) ?? 0;
      // An unknown conversation is ingest's to refuse (404); a topic or thread not created yet starts at 0,
      // as a new conversation does (its first message creates it).
      const head = heads.get(conv) ?? (isChildConv(conv) ? 0 : undefined);
      if (head !== undefined && seq - head > this.options.maxJump) jumps.push({ conv, seq, head, refused: refuse });
    }
    for (const jump of jumps) this.onJump(jump);
    const first = jumps[0];
    if (refuse && first) {
      throw new RedpointError(
        'seq_jump',
        `seq ${first.seq} of conversation ${first.conv} is ${first.seq - first.head} above its head ${first.head}, more than MAX_SEQ_JUMP ${this.options.maxJump} allows: seqs must be dense per conversation (1, 2, 3, ...), not message ids or timestamps; a head that is already wrong is lowered with \`redpoint rebase\``,
      );
    }
  }
}
