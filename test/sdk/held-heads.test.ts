import { describe, expect, it } from 'vitest';
import { HeldHeads } from '../../client-demo/sdk/src/held-heads.js';

describe('head pushes held while a pull is in flight (HeldHeads)', () => {
  it('are merged per conversation as they come: the larger lastSeq and time, the union of @all and non-counting seqs', () => {
    const held = new HeldHeads();
    for (let seq = 1; seq <= 500; seq++) {
      held.add({
        t: 'head',
        conv: 'g',
        lastSeq: seq,
        headAt: 1000 + (seq % 7),
        ...(seq % 100 === 0 ? { mentionAll: [seq] } : {}),
        ...(seq % 250 === 0 ? { nocount: [seq, seq - 1] } : {}),
      });
    }
    // A late push of an older head changes nothing.
    held.add({ t: 'head', conv: 'g', lastSeq: 3, mentionAll: [100] });
    held.add({ t: 'head', conv: 'h', lastSeq: 2 });
    expect(held.frames()).toEqual([
      { t: 'head', conv: 'g', lastSeq: 500, headAt: 1006, mentionAll: [100, 200, 300, 400, 500], nocount: [249, 250, 499, 500] },
      { t: 'head', conv: 'h', lastSeq: 2 },
    ]);
    held.clear();
    expect(held.frames()).toEqual([]);
  });
});
