import type { HeadFrame } from '../../../protocol/frames.js';
import { KeptExtras } from './head-extras.js';
import { Heads } from './heads.js';

/**
 * Head pushes held while a pull is unanswered (sync.ts), merged as the store merges them (Heads,
 * KeptExtras: max-registers and capped unions): one frame per conversation however many pushes
 * come during a long pull.
 */
export class HeldHeads {
  private heads = new Heads();
  private extras = new KeptExtras();

  add(frame: HeadFrame): void {
    this.heads.raise(frame.conv, frame.lastSeq);
    this.extras.mergeHead(frame);
  }

  /** One frame per conversation held, carrying all that its pushes carried. */
  frames(): HeadFrame[] {
    const extras = new Map(this.extras.entries().map((e) => [e.conv, e]));
    return this.heads.entries().map(([conv, lastSeq]) => {
      const e = extras.get(conv);
      return {
        t: 'head',
        conv,
        lastSeq,
        ...(e?.at !== undefined ? { headAt: e.at } : {}),
        ...(e?.mentionAll ? { mentionAll: e.mentionAll } : {}),
        ...(e?.nocount ? { nocount: e.nocount } : {}),
      };
    });
  }

  clear(): void {
    this.heads = new Heads();
    this.extras = new KeptExtras();
  }
}
