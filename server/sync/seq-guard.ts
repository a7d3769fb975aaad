import { RedpointError } from '../../protocol/errors.js';
import type { Engine } from '../engine/engine.js';

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
}

/**
 * Seq sanity. Seqs are dense per conversation by contract, and unread counts are differences of
 * seqs, so a seq far above the head (a message id passed as a seq: 1, then 1,700,000,000) would
 * make a badge of 1.7 billion that no read short of that seq clears. The guard compares each seq
 * with the conversation's head read just before (one round trip per request, only when on). The
 * head may move in between; a jump is then measured from a head a few messages old, which is
 * what a threshold in the thousands is for.
 */
export class SeqGuard {
  constructor(
    private readonly engine: Engine,
    private readonly options: SeqGuardOptions,
    private readonly onJump: (jump: SeqJump) => void,
  ) {}

  get enabled(): boolean {
    return this.options.maxJump > 0;
  }

  /** Throws `seq_jump` (refuse) when any seq jumps; reports every jump either way. */
  async check(items: readonly { conv: string; seq: number }[]): Promise<void> {
    if (!this.enabled || items.length === 0) return;
    const top = new Map<string, number>();
    for (const { conv, seq } of items) top.set(conv, Math.max(top.get(conv) ?? 0, seq));
    const heads = await this.engine.heads([...top.keys()]);
    const refuse = this.options.action === 'refuse';
    const jumps: SeqJump[] = [];
    for (const [conv, seq] of top) {
      const head = heads.get(conv);
      // An unknown conversation is ingest's to refuse (404).
      if (head !== undefined && seq - head > this.options.maxJump) jumps.push({ conv, seq, head, refused: refuse });
    }
    for (const jump of jumps) this.onJump(jump);
    const first = jumps[0];
    if (refuse && first) {
      throw new RedpointError(
        'seq_jump',
        `seq ${first.seq} of conversation ${first.conv} is ${first.seq - first.head} above its head ${first.head} (MAX_SEQ_JUMP ${this.options.maxJump}); seqs must be dense per conversation`,
      );
    }
  }
}
