import { describe, expect, it } from 'vitest';
import type { ConvState } from '../../protocol/types.js';
import {
  decodeEntries,
  decodeEntryText,
  decodeMemberTag,
  decodeRecord,
  decodeRecordFast,
  decodeSnapshotText,
  decodeState,
  encodeEntryText,
  encodeMemberTag,
  encodeRecord,
  encodeSnapshotText,
} from '../../server/engine/state-text.js';

/**
 * The stored texts at their edges: what a corrupted or hand-written store holds must be refused,
 * not read as another number (memory-structures.test.ts holds the round trips and the fast
 * decoder against the plain one; the mutants that survived those are named in
 * bench/reports/mutation.md).
 */
const state = (over: Partial<ConvState> = {}): ConvState => ({
  conv: 'c1',
  lastSeq: 9,
  readSeq: 4,
  mentions: 2,
  muted: true,
  markedUnread: false,
  category: 'group',
  large: true,
  deletedSeq: -1,
  ...over,
});

describe('record text', () => {
  it('reads each flag from its own place and the default category from the empty one', () => {
    const rec = decodeRecord('c', '0101|9|4|-1|3|2||6,8');
    expect(rec).toEqual({
      conv: 'c',
      member: false,
      muted: true,
      markedUnread: false,
      large: true,
      lastSeq: 9,
      readSeq: 4,
      deletedSeq: -1,
      gen: 3,
      joinGen: 2,
      category: 'default',
      mentionSeqs: [6, 8],
      readGen: 0,
      readMentionSeqs: [],
      mentionsOnly: false,
      at: 0,
      nocountSeqs: [],
    });
    expect(encodeRecord(rec)).toBe('0101|9|4|-1|3|2||6,8');
    expect(decodeRecordFast('c', '0101|9|4|-1|3|2||6,8')).toEqual(rec);
    expect(decodeRecordFast('c', '1010|9|4|-1|3|2|group|')).toMatchObject({
      member: true,
      muted: false,
      markedUnread: true,
      large: false,
      category: 'group',
      mentionSeqs: [],
    });
  });

  it("carries the read register's extension (readGen, spent mentions) only when it holds something", () => {
    const rec = decodeRecord('c', '1000|9|4|-1|3|2|g|6,8');
    expect(encodeRecord({ ...rec, readGen: 2 })).toBe('1000|9|4|-1|3|2|g|6,8|2|');
    expect(encodeRecord({ ...rec, readMentionSeqs: [1, 3] })).toBe('1000|9|4|-1|3|2|g|6,8|0|1,3');
    expect(decodeRecord('c', '1000|9|4|-1|3|2|g|6,8|2|1,3')).toEqual({ ...rec, readGen: 2, readMentionSeqs: [1, 3] });
    expect(decodeRecordFast('c', '1000|9|4|-1|3|2|g|6,8|2|1,3')).toEqual({ ...rec, readGen: 2, readMentionSeqs: [1, 3] });
    expect(() => decodeRecord('c', '1000|9|4|-1|3|2|g|6,8|x|')).toThrow('malformed stored number');
  });

  it('keeps the level in the muted flag (2: mentions only) and the last activity after the read extension, only when set', () => {
    const rec = decodeRecord('c', '1000|9|4|-1|3|2|g|6,8');
    expect(encodeRecord({ ...rec, mentionsOnly: true })).toBe('1200|9|4|-1|3|2|g|6,8');
    expect(decodeRecord('c', '1200|9|4|-1|3|2|g|6,8')).toEqual({ ...rec, mentionsOnly: true });
    expect(decodeRecordFast('c', '1200|9|4|-1|3|2|g|6,8')).toEqual({ ...rec, mentionsOnly: true });
    expect(encodeRecord({ ...rec, at: 1_760_000_000_000 })).toBe('1000|9|4|-1|3|2|g|6,8|0||1760000000000');
    expect(encodeRecord({ ...rec, at: 5, readGen: 2, readMentionSeqs: [1] })).toBe('1000|9|4|-1|3|2|g|6,8|2|1|5');
    expect(decodeRecord('c', '1000|9|4|-1|3|2|g|6,8|0||1760000000000')).toEqual({ ...rec, at: 1_760_000_000_000 });
    expect(decodeRecordFast('c', '1000|9|4|-1|3|2|g|6,8|2|1|5')).toEqual({ ...rec, at: 5, readGen: 2, readMentionSeqs: [1] });
    expect(() => decodeRecord('c', '1000|9|4|-1|3|2|g|6,8|0||x')).toThrow('malformed stored number');
    // Issue 43: a 12th field (the non-counting seqs) needs `at` (0 when unknown) before it.
    expect(() => decodeRecord('c', '1000|9|4|-1|3|2|g|6,8|0|||5')).toThrow('malformed stored number');
    expect(() => decodeRecord('c', '1000|9|4|-1|3|2|g|6,8|0||0|5|')).toThrow('malformed stored record');
  });

  it('keeps the non-counting seqs after `at` (issue 43), only when some, and the state their count', () => {
    const rec = decodeRecord('c', '1000|9|4|-1|3|2|g|6,8');
    const text = encodeRecord({ ...rec, nocountSeqs: [3, 5, 11] });
    expect(text).toBe('1000|9|4|-1|3|2|g|6,8|0||0|3,5,11');
    expect(decodeRecord('c', text)).toEqual({ ...rec, nocountSeqs: [3, 5, 11] });
    expect(decodeRecordFast('c', text)).toEqual({ ...rec, nocountSeqs: [3, 5, 11] });
    const state = { conv: 'c', lastSeq: 9, readSeq: 4, mentions: 0, muted: false, markedUnread: false, category: 'default', large: false, deletedSeq: -1 };
    expect(encodeEntryText('c', { ...state, nocount: 1 })).toBe('c|000|9|4|0|-1||0|0|1');
    expect(decodeEntryText('c|000|9|4|0|-1||0|0|1').state).toEqual({ ...state, nocount: 1 });
  });

  it('refuses a record of another shape or with a number that is not a safe integer, naming the conversation or the text', () => {
    for (const text of ['0101|9|4|-1|3|2|', '0101|9|4|-1|3|2|||', '0101|9|4|-1|3|2|g|6|x']) {
      expect(() => decodeRecord('c9', text), text).toThrow('malformed stored record of c9');
    }
    for (const text of ['0101||4|-1|3|2||', '0101|9|4.5|-1|3|2||', '0101|9|4|-1|3|2||6,', '0101|9|4|-1|3|9007199254740993||', '0101|x|4|-1|3|2||']) {
      expect(() => decodeRecord('c', text), text).toThrow('malformed stored number');
      expect(() => decodeRecordFast('c', text), text).toThrow('malformed stored number');
    }
  });
});

describe('entry text', () => {
  it('writes and reads a state, flags in their places, the default category as empty', () => {
    expect(encodeEntryText('c1', state())).toBe('c1|101|9|4|2|-1|group');
    expect(encodeEntryText('c1', state({ muted: false, markedUnread: true, large: false, category: 'default' }))).toBe('c1|010|9|4|2|-1|');
    expect(decodeEntryText('c1|101|9|4|2|-1|group')).toEqual({ conv: 'c1', state: state() });
    expect(decodeEntryText('c1|010|9|4|2|-1|').state).toEqual(state({ muted: false, markedUnread: true, large: false, category: 'default' }));
  });

  it('shows the read generation as an eighth field only when above 0', () => {
    expect(encodeEntryText('c1', state({ readGen: 3 }))).toBe('c1|101|9|4|2|-1|group|3');
    expect(encodeEntryText('c1', state({ readGen: 0 }))).toBe('c1|101|9|4|2|-1|group');
    expect(decodeEntryText('c1|101|9|4|2|-1|group|3').state).toEqual(state({ readGen: 3 }));
    expect(decodeSnapshotText(encodeSnapshotText([state({ readGen: 3 }), state({ conv: 'c2' })]))).toEqual([state({ readGen: 3 }), state({ conv: 'c2' })]);
  });

  it('shows mentions only as 2 in the muted place, and the last activity as a ninth field (readGen then 0) only when set', () => {
    const quiet = state({ muted: false, level: 'mentions' });
    expect(encodeEntryText('c1', quiet)).toBe('c1|201|9|4|2|-1|group');
    expect(decodeEntryText('c1|201|9|4|2|-1|group').state).toEqual(quiet);
    expect(encodeEntryText('c1', state({ at: 1_760_000_000_000 }))).toBe('c1|101|9|4|2|-1|group|0|1760000000000');
    expect(decodeEntryText('c1|101|9|4|2|-1|group|0|1760000000000').state).toEqual(state({ at: 1_760_000_000_000 }));
    expect(decodeEntryText('c1|101|9|4|2|-1|group|3|7').state).toEqual(state({ readGen: 3, at: 7 }));
  });

  it('a left conversation is the bare id; an empty state text is none', () => {
    expect(encodeEntryText('c1', null)).toBe('c1');
    expect(decodeEntryText('c1')).toEqual({ conv: 'c1', state: null });
    expect(decodeState('')).toBeNull();
    expect(decodeState('c1|101|9|4|2|-1|group')).toEqual(state());
  });

  it('refuses an entry of another shape', () => {
    for (const text of ['c1|101|9|4|2|-1', 'c1|101|9|4|2|-1|g|1|2|3|x']) expect(() => decodeEntryText(text), text).toThrow('malformed stored entry');
    expect(() => decodeEntryText('c1|101|9|4|2|-1|g|x')).toThrow('malformed stored number');
    expect(() => decodeEntryText('c1|101|9|4|x|-1|g')).toThrow('malformed stored number');
  });
});

describe('snapshot and entries', () => {
  it('an empty snapshot is no states; left conversations in one are skipped', () => {
    expect(decodeSnapshotText('')).toEqual([]);
    expect(decodeSnapshotText(`${encodeSnapshotText([state(), state({ conv: 'c2' })])}\nc3`)).toEqual([state(), state({ conv: 'c2' })]);
  });

  it('entries take their versions from their positions', () => {
    expect(decodeEntries(['c1|101|9|4|2|-1|group', 'c2'], 7)).toEqual([
      { v: 7, conv: 'c1', state: state() },
      { v: 8, conv: 'c2', state: null },
    ]);
  });
});

describe('member tag', () => {
  it('is joinGen|joinHead, both ways', () => {
    expect(encodeMemberTag({ joinGen: 12, joinHead: 340 })).toBe('12|340');
    expect(decodeMemberTag('u1', '12|340')).toEqual({ uid: 'u1', joinGen: 12, joinHead: 340 });
  });
});
