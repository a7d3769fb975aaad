import type { Engine } from '../engine/engine.js';

/** A read as a client sends it: conversation, seq, and the read generation it was made in (absent: the current one). */
export type AskedRead = readonly [conv: string, seq: number] | readonly [conv: string, seq: number, gen: number];

export interface CappedRead {
  conv: string;
  /** What the client asked for. */
  seq: number;
  /** The head it was measured from, and what was applied instead. */
  head: number;
  applied: number;
}

/** The default of MAX_READ_AHEAD (config.ts). */
export const DEFAULT_MAX_READ_AHEAD = 1000;

/**
 * MAX_READ_AHEAD. A read may overtake the ingest of the message it reads (the client saw the
 * message before the message service reported it), so a read above the head is legitimate; but
 * readSeq only ever rises, and a read of seq 999 at head 2 would silence every message up to 999
 * for good. A read more than `maxAhead` above its conversation's head is applied as a read of
 * head + maxAhead, and reported.
 *
 * The heads are read just before the reads are applied (one round trip). Heads only rise, so a
 * head that moved in between caps at most a little lower than it would have; a conversation
 * deleted and re-created in between is measured from its old head. An unknown conversation is
 * passed through for the engine to refuse.
 */
export class ReadCap {
  constructor(
    private readonly engine: Engine,
    private readonly maxAhead: number,
    private readonly onCapped: (capped: CappedRead) => void,
  ) {}

  /** The reads, each as asked or capped (a read's generation, if any, kept). */
  async apply(reads: readonly AskedRead[]): Promise<AskedRead[]> {
    // A seq within the bound of head 0 is within it of every head: most reads need no round trip.
    if (this.maxAhead <= 0 || reads.every(([, seq]) => seq <= this.maxAhead)) return [...reads];
    const heads = await this.engine.heads([...new Set(reads.map(([conv]) => conv))]);
    return reads.map((read): AskedRead => {
      const [conv, seq, gen] = read;
      const head = heads.get(conv);
      if (head === undefined || seq - head <= this.maxAhead) return read;
      const applied = head + this.maxAhead;
      this.onCapped({ conv, seq, head, applied });
      return gen === undefined ? [conv, applied] : [conv, applied, gen];
    });
  }
}
