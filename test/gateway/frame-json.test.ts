import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ChangeFrame } from '../../protocol/frames.js';
import { ID_PATTERN } from '../../protocol/limits.js';
import { changeFrameJson } from '../../server/gateway/frame-json.js';

const id = fc.stringMatching(new RegExp(ID_PATTERN));
const seq = fc.nat({ max: Number.MAX_SAFE_INTEGER });

/** States as both engines make them: these nine fields, in this order. */
const state = fc.record({
  conv: id,
  lastSeq: seq,
  readSeq: seq,
  mentions: seq,
  muted: fc.boolean(),
  markedUnread: fc.boolean(),
  category: id,
  large: fc.boolean(),
  deletedSeq: seq,
});

const frame = (s: fc.Arbitrary<ChangeFrame['state']>, text: fc.Arbitrary<string>, n: fc.Arbitrary<number>): fc.Arbitrary<ChangeFrame> =>
  fc.record({ t: fc.constant('change' as const), epoch: text, v: n, conv: text, state: s });

describe('changeFrameJson', () => {
  it('writes the bytes JSON.stringify writes, for the frames the engines make', async () => {
    // Issue 43: and with a last activity after them (rules.ts toConvState's order), or a level or readGen before it.
    const withAt = fc.record({ base: state, at: seq }).map(({ base, at }) => ({ ...base, at }));
    const withMore = fc
      .record({ base: state, readGen: fc.option(seq, { nil: undefined }), at: seq })
      .map(({ base, readGen, at }) => ({ ...base, ...(readGen !== undefined ? { readGen } : {}), level: 'mentions' as const, at }));
    await fc.assert(
      fc.property(frame(fc.option(fc.oneof(state, withAt, withMore), { nil: null }), id, seq), (f) => {
        expect(changeFrameJson(f)).toBe(JSON.stringify(f));
      }),
      { numRuns: 2000 },
    );
  });

  it('and for anything else: text that needs escaping, numbers that are not plain integers', async () => {
    const anyNumber = fc.oneof(seq, fc.double(), fc.constant(Number.NaN), fc.constant(-0), fc.integer());
    const anyText = fc.oneof(id, fc.string(), fc.constantFrom('a"b', 'a\\b', 'line\nbreak', '\u2028', 'é'));
    const odd = fc.record({
      conv: anyText,
      lastSeq: anyNumber,
      readSeq: anyNumber,
      mentions: anyNumber,
      muted: fc.boolean(),
      markedUnread: fc.boolean(),
      category: anyText,
      large: fc.boolean(),
      deletedSeq: anyNumber,
    });
    await fc.assert(
      fc.property(frame(fc.option(odd, { nil: null }), anyText, anyNumber), (f) => {
        expect(changeFrameJson(f)).toBe(JSON.stringify(f));
      }),
      { numRuns: 2000 },
    );
  });

  it('a state with other fields, fewer, or another order is written as JSON.stringify writes it', () => {
    const base = { conv: 'c', lastSeq: 3, readSeq: 1, mentions: 0, muted: false, markedUnread: false, category: 'default', large: false, deletedSeq: 0 };
    const { deletedSeq: _dropped, ...fewer } = base;
    const reorderedState = {
      lastSeq: 3,
      conv: 'c',
      readSeq: 1,
      mentions: 0,
      muted: false,
      markedUnread: false,
      category: 'default',
      large: false,
      deletedSeq: 0,
    };
    const variants: object[] = [{ ...base, extra: 1 }, fewer, reorderedState, { ...base, muted: 'no' }];
    for (const s of variants) {
      const f = { t: 'change', epoch: 'e1', v: 7, conv: 'c', state: s } as unknown as ChangeFrame;
      expect(changeFrameJson(f)).toBe(JSON.stringify(f));
    }
    const reordered = { epoch: 'e1', t: 'change', v: 7, conv: 'c', state: base } as unknown as ChangeFrame;
    expect(changeFrameJson(reordered)).toBe(JSON.stringify(reordered));
  });
});
