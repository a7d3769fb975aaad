import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../protocol/limits.js';
import {
  applyRule,
  contribution,
  mergeMentions,
  needsReset,
  type StoredConv,
  type StreamPosition,
  sameRecord,
  toConvState,
  trimmedBase,
} from '../../server/engine/rules.js';

/**
 * The rules of rules.ts that the engines' conformance suites cannot reach through an engine: a
 * function's own contract at its boundaries (the surviving mutants of `npm run mutate` named
 * them: bench/reports/mutation.md). The engines' behaviour is in conformance.ts.
 */
const member = (over: Partial<StoredConv> = {}): StoredConv => ({
  conv: 'c',
  member: true,
  lastSeq: 10,
  readSeq: 4,
  mentionSeqs: [6, 9],
  muted: false,
  markedUnread: false,
  category: 'group',
  large: false,
  deletedSeq: -1,
  gen: 5,
  joinGen: 5,
  readGen: 0,
  readMentionSeqs: [],
  mentionsOnly: false,
  at: 0,
  nocountSeqs: [],
  ...over,
});

describe('contribution', () => {
  it('counts a visible, unmuted, write-diffused membership', () => {
    expect(contribution(member())).toEqual({ unread: 6, mentions: 2, category: 'group' });
  });

  it('counts nothing while the conversation is deleted up to its head, whatever the record holds (a restored row)', () => {
    expect(contribution(member({ deletedSeq: 10 }))).toEqual({ unread: 0, mentions: 0, category: '' });
    expect(contribution(member({ deletedSeq: 9 }))).toEqual({ unread: 6, mentions: 2, category: 'group' });
  });
});

describe('mergeMentions', () => {
  it('keeps the seqs above readSeq, distinct, in numeric order', () => {
    expect(mergeMentions([4, 9, 12], [10, 3, 12, 100], 4)).toEqual([9, 10, 12, 100]);
  });

  it('keeps the newest `cap`', () => {
    expect(mergeMentions([11, 2], [30, 5, 20], 0, 3)).toEqual([11, 20, 30]);
    expect(mergeMentions([1, 2], [3], 0, 3)).toEqual([1, 2, 3]);
  });
});

describe('applyRule', () => {
  it("applies a membership op of the record's own generation (a register ordered by gen: equal is not older)", () => {
    const after = applyRule(member(), { type: 'membership', uid: 'u', conv: 'c', gen: 5, member: false });
    expect(after?.member).toBe(false);
    expect(applyRule(member(), { type: 'membership', uid: 'u', conv: 'c', gen: 4, member: false })?.member).toBe(true);
  });

  it('returns the record itself when an op does not apply (a read or an unread-from of a non-member)', () => {
    const rec = member({ member: false });
    expect(applyRule(rec, { type: 'read', uid: 'u', conv: 'c', seq: 9 })).toBe(rec);
    expect(applyRule(rec, { type: 'unread-from', uid: 'u', conv: 'c', seq: 3, gen: 1 })).toBe(rec);
  });
});

describe('the read register (readGen, readSeq): unread from here', () => {
  const read = (seq: number, gen?: number) => ({ type: 'read' as const, uid: 'u', conv: 'c', seq, ...(gen === undefined ? {} : { gen }) });
  const unreadFrom = (seq: number, gen?: number) => ({ type: 'unread-from' as const, uid: 'u', conv: 'c', seq, ...(gen === undefined ? {} : { gen }) });
  const run = (ops: ReturnType<typeof read | typeof unreadFrom>[], rec: StoredConv = member({ lastSeq: 30, readSeq: 5, mentionSeqs: [8, 12, 25] })) =>
    ops.reduce<StoredConv | undefined>((r, op) => applyRule(r, op), rec);

  it('device A reads to 20 (made in generation 0) while device B marks unread from 10: readSeq 9 in both orders', () => {
    const a = read(20, 0);
    const b = unreadFrom(10, 1);
    for (const order of [
      [a, b],
      [b, a],
    ]) {
      const after = run(order);
      expect(after).toMatchObject({ readSeq: 9, readGen: 1, mentionSeqs: [12, 25], readMentionSeqs: [8] });
    }
  });

  it('a read made after the unread-from (its generation) raises again; one without a generation applies to the current one', () => {
    expect(run([unreadFrom(10, 1), read(20, 1)])).toMatchObject({ readSeq: 20, readGen: 1, mentionSeqs: [25], readMentionSeqs: [8, 12] });
    expect(run([unreadFrom(10, 1), read(20)])).toMatchObject({ readSeq: 20, readGen: 1 });
  });

  it('a retry of the same unread-from (same generation) changes nothing; without a generation it takes the next one', () => {
    const once = run([read(20, 0), unreadFrom(10, 1)]);
    expect(sameRecord(run([read(20, 0), unreadFrom(10, 1), unreadFrom(10, 1)]), once)).toBe(true);
    expect(run([unreadFrom(10), unreadFrom(10)])).toMatchObject({ readSeq: 9, readGen: 2 });
  });

  it('two unread-froms of one generation: the larger position (a max-register within the generation), in either order', () => {
    expect(run([unreadFrom(10, 1), unreadFrom(15, 1)])).toMatchObject({ readSeq: 14 });
    expect(run([unreadFrom(15, 1), unreadFrom(10, 1)])).toMatchObject({ readSeq: 14 });
  });

  it('never below deletedSeq nor 0; clears markedUnread; mentions above the new position count again', () => {
    expect(run([unreadFrom(3, 1)], member({ lastSeq: 30, readSeq: 20, deletedSeq: 12 }))).toMatchObject({ readSeq: 12 });
    expect(run([unreadFrom(0, 1)])).toMatchObject({ readSeq: 0 });
    const marked = run([unreadFrom(10, 1)], member({ lastSeq: 30, readSeq: 20, markedUnread: true, mentionSeqs: [25], readMentionSeqs: [3, 11] }));
    expect(marked).toMatchObject({ markedUnread: false, mentionSeqs: [11, 25], readMentionSeqs: [3] });
    expect(contribution(marked)).toEqual({ unread: 21, mentions: 2, category: 'group' });
  });

  it('floored at the join head of the membership it was made in; made in another membership (a rejoin since), it changes nothing', () => {
    expect(run([unreadFrom(3, 1)].map((op) => ({ ...op, floor: 7, joinGen: 5 })))).toMatchObject({ readSeq: 7, readGen: 1 });
    const rec = member({ lastSeq: 30, readSeq: 20 });
    expect(applyRule(rec, { ...unreadFrom(3, 1), floor: 7, joinGen: 4 })).toBe(rec);
  });

  it('a read moves the mentions it spends to readMentionSeqs, the newest `cap` kept', () => {
    const after = run([read(26)], member({ lastSeq: 30, readSeq: 5, mentionSeqs: [8, 12, 25, 28] }));
    expect(after).toMatchObject({ mentionSeqs: [28], readMentionSeqs: [8, 12, 25] });
  });
});

describe('sameRecord', () => {
  it('is true for the same record, or an equal copy; false against none', () => {
    const rec = member();
    expect(sameRecord(rec, rec)).toBe(true);
    expect(sameRecord(undefined, undefined)).toBe(true);
    expect(sameRecord(rec, { ...rec, mentionSeqs: [...rec.mentionSeqs] })).toBe(true);
    expect(sameRecord(rec, undefined)).toBe(false);
    expect(sameRecord(undefined, rec)).toBe(false);
  });

  const changes: Partial<StoredConv>[] = [
    { member: false },
    { lastSeq: 11 },
    { readSeq: 5 },
    { muted: true },
    { markedUnread: true },
    { category: 'private' },
    { large: true },
    { deletedSeq: 3 },
    { gen: 6 },
    { joinGen: 4 },
    { mentionSeqs: [6] },
    { mentionSeqs: [6, 8] },
    { mentionSeqs: [7, 9] },
  ];
  for (const change of changes) {
    it(`sees a record that differs only in ${JSON.stringify(change)}`, () => {
      expect(sameRecord(member(), member(change))).toBe(false);
      expect(sameRecord(member(change), member())).toBe(false);
    });
  }
});

describe('needsReset', () => {
  const pos = (over: Partial<StreamPosition> = {}): StreamPosition => ({ epoch: 'e', version: 30, base: 10, snapshotVersion: 20, interval: 5, ...over });

  it('resets a cursor ahead of the stream or behind its trimmed base', () => {
    expect(needsReset(pos(), { epoch: 'e', version: 31 })).toBe(true);
    expect(needsReset(pos(), { epoch: 'e', version: 9 })).toBe(true);
    expect(needsReset(pos({ snapshotVersion: 0 }), { epoch: 'e', version: 31 })).toBe(true);
    expect(needsReset(pos({ snapshotVersion: 0 }), { epoch: 'e', version: 9 })).toBe(true);
  });

  it('continues within the stream unless a newer snapshot is closer than the deltas', () => {
    expect(needsReset(pos(), { epoch: 'e', version: 10 })).toBe(true);
    expect(needsReset(pos(), { epoch: 'e', version: 25 })).toBe(false);
    // Far behind, but no snapshot newer than the cursor: only deltas can bring it.
    expect(needsReset(pos(), { epoch: 'e', version: 20 })).toBe(false);
    expect(needsReset(pos({ snapshotVersion: 12 }), { epoch: 'e', version: 15 })).toBe(false);
  });
});

describe('trimmedBase', () => {
  it('keeps the base until the stream holds an interval and a quarter', () => {
    // interval 8: a quarter is 2, so up to 10 entries stay.
    expect(trimmedBase(0, 10, 10, 8)).toBe(0);
    expect(trimmedBase(5, 14, 14, 8)).toBe(5);
    expect(trimmedBase(0, 11, 10, 8)).toBe(3);
    // interval 2: a quarter rounds to 0, at least 1.
    expect(trimmedBase(0, 3, 3, 2)).toBe(0);
    expect(trimmedBase(0, 4, 4, 2)).toBe(2);
  });

  it('trims to one interval behind the version, never past the snapshot', () => {
    expect(trimmedBase(0, 11, 2, 8)).toBe(2);
    expect(trimmedBase(0, 30, 25, 8)).toBe(22);
  });
});

describe('non-counting seqs (issue 43, what counts)', () => {
  const cap = LIMITS.nocountSeqsPerConversation;
  const withNocount = (rec: StoredConv, nocountSeqs: number[]): StoredConv =>
    applyRule(rec, { type: 'message', uid: 'u', conv: 'c', lastSeq: 0, readSeq: 0, mentionSeqs: [], nocountSeqs }) as StoredConv;

  it('keeps the newest cap of them: the lowest, read ones go first, so unread stays exact', () => {
    // readSeq 4 of 5,000: 1,000 non-counting seqs above it are all kept, the read ones forgotten.
    const rec = withNocount(
      member({ lastSeq: 5000, readSeq: 4, mentionSeqs: [] }),
      Array.from({ length: cap + 3 }, (_, i) => i + 1),
    );
    expect(rec.nocountSeqs).toHaveLength(cap);
    expect(rec.nocountSeqs[0]).toBe(4);
    expect(contribution(rec).unread).toBe(5000 - 4 - (cap - 1));
    expect(toConvState(rec).nocount).toBe(cap - 1);
  });

  it('above the cap the forgotten ones count again: an over-count, never a negative one', () => {
    const rec = withNocount(
      member({ lastSeq: cap + 10, readSeq: 0, mentionSeqs: [] }),
      Array.from({ length: cap + 10 }, (_, i) => i + 1),
    );
    expect(contribution(rec).unread).toBe(10);
  });

  it('a delete forgets those at or below deletedSeq, a leave all of them', () => {
    const rec = withNocount(member({ lastSeq: 10, readSeq: 4, mentionSeqs: [] }), [3, 8, 12]);
    const deleted = applyRule(rec, { type: 'settings', uid: 'u', conv: 'c', deleteAt: 10 }) as StoredConv;
    expect(deleted.nocountSeqs).toEqual([12]);
    const left = applyRule(rec, { type: 'membership', uid: 'u', conv: 'c', gen: 6, member: false }) as StoredConv;
    expect(left.nocountSeqs).toEqual([]);
  });
});
