import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { appendEntry, clearEntries, dropNewestEntries, ENTRY_CHUNK, type EntryLog, entryTexts, trimEntries } from '../../server/engine/memory/entry-log.js';
import {
  EMPTY_TABLE,
  SMALL_TABLE,
  type TextTable,
  tableCopy,
  tableDelete,
  tableEntries,
  tableForEach,
  tableGet,
  tableHas,
  tableKeys,
  tableSet,
  tableSize,
  tableValues,
} from '../../server/engine/memory/text-table.js';
import type { StoredConv } from '../../server/engine/rules.js';
import { decodeRecord, decodeRecordFast, encodeRecord } from '../../server/engine/state-text.js';

/**
 * The memory engine's compact containers against the plain structures they replace (a Map, an
 * array of entry texts): random operation sequences long enough to cross a small table's size and
 * several entry chunks, checked after every step.
 */

// Keys that are prefixes of each other and long enough (>= 13 characters) that V8 slices them.
const KEYS = ['a', 'ab', 'b', 'c1', 'c10', 'c11', 'conversation-0001', 'conversation-00012', 'x.y:z@w_-', 'k5', 'k6', 'k7', 'k8', 'k9', 'q'];
const valueArb = fc.stringMatching(/^[0-9|,a-z-]{1,30}$/);

type TableOp = { kind: 'set'; key: string; value: string } | { kind: 'delete'; key: string } | { kind: 'copy' };

const tableOpArb: fc.Arbitrary<TableOp> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('set' as const), key: fc.constantFrom(...KEYS), value: valueArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: fc.constantFrom(...KEYS) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'copy' as const }) },
);

function expectSameAsMap(table: TextTable, model: Map<string, string>): void {
  expect(tableEntries(table)).toEqual([...model]);
  const visited: Array<[string, string]> = [];
  tableForEach(table, (value, key) => visited.push([key, value]));
  expect(visited).toEqual([...model]);
  expect(tableKeys(table)).toEqual([...model.keys()]);
  expect(tableValues(table)).toEqual([...model.values()]);
  expect(tableSize(table)).toBe(model.size);
  for (const key of KEYS) {
    expect(tableGet(table, key)).toBe(model.get(key));
    expect(tableHas(table, key)).toBe(model.has(key));
  }
}

describe('TextTable', () => {
  it('behaves as a Map (order, replace in place, delete), across the switch from one string to a Map', async () => {
    await fc.assert(
      fc.property(fc.array(tableOpArb, { minLength: 1, maxLength: 60 }), (ops) => {
        let table: TextTable = EMPTY_TABLE;
        const model = new Map<string, string>();
        for (const op of ops) {
          if (op.kind === 'set') {
            table = tableSet(table, op.key, op.value);
            model.set(op.key, op.value);
          } else if (op.kind === 'delete') {
            table = tableDelete(table, op.key);
            model.delete(op.key);
          } else {
            // A copy is independent of the original: writes to the copy leave it alone.
            const before = [...tableEntries(table)];
            const copy = tableSet(tableCopy(table), 'q', 'copied');
            expect(tableGet(copy, 'q')).toBe('copied');
            expect(tableEntries(table)).toEqual(before);
          }
          expectSameAsMap(table, model);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('stays one string up to SMALL_TABLE entries', () => {
    let table: TextTable = EMPTY_TABLE;
    for (let i = 0; i < SMALL_TABLE; i++) table = tableSet(table, `k${i}`, String(i));
    expect(typeof table).toBe('string');
    table = tableSet(table, 'one-more', 'x');
    expect(table).toBeInstanceOf(Map);
    expect(tableSize(table)).toBe(SMALL_TABLE + 1);
  });
});

type LogOp = { kind: 'append'; text: string } | { kind: 'trim'; n: number } | { kind: 'dropNewest'; n: number } | { kind: 'clear' };

const logOpArb: fc.Arbitrary<LogOp> = fc.oneof(
  { weight: 12, arbitrary: fc.record({ kind: fc.constant('append' as const), text: fc.stringMatching(/^[0-9a-z|-]{1,24}$/) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('trim' as const), n: fc.nat(ENTRY_CHUNK * 2) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('dropNewest' as const), n: fc.nat(5) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'clear' as const }) },
);

describe('EntryLog', () => {
  it('behaves as an array of entry texts (append, trim from the front, drop from the back), across many chunks', async () => {
    await fc.assert(
      fc.property(fc.array(logOpArb, { minLength: 1, maxLength: 200 }), fc.nat(80), fc.nat(80), (ops, start, limit) => {
        const log: EntryLog = { entryChunks: '', entryCount: 0, entryTail: 0 };
        const model: string[] = [];
        for (const op of ops) {
          if (op.kind === 'append') {
            appendEntry(log, op.text);
            model.push(op.text);
          } else if (op.kind === 'trim') {
            trimEntries(log, op.n);
            model.splice(0, op.n);
          } else if (op.kind === 'dropNewest') {
            dropNewestEntries(log, op.n);
            model.splice(Math.max(0, model.length - op.n), op.n);
          } else {
            clearEntries(log);
            model.length = 0;
          }
          expect(log.entryCount).toBe(model.length);
          expect(entryTexts(log, 0, Number.POSITIVE_INFINITY)).toEqual(model);
        }
        expect(entryTexts(log, start, limit)).toEqual(model.slice(start, start + limit));
      }),
      { numRuns: 300 },
    );
  });
});

const recArb: fc.Arbitrary<StoredConv> = fc
  .record({
    conv: fc.constant('c1'),
    member: fc.boolean(),
    lastSeq: fc.nat(),
    readSeq: fc.nat(),
    mentionSeqs: fc.array(fc.nat(), { maxLength: 5 }),
    muted: fc.boolean(),
    markedUnread: fc.boolean(),
    category: fc.constantFrom('default', 'group', 'private'),
    large: fc.boolean(),
    deletedSeq: fc.integer({ min: -1, max: 1_000_000 }),
    gen: fc.maxSafeNat(),
    joinGen: fc.maxSafeNat(),
    // Mostly 0 (the common 8-field text), sometimes the read register's extension.
    readGen: fc.oneof(fc.constant(0), fc.maxSafeNat()),
    readMentionSeqs: fc.oneof(fc.constant<number[]>([]), fc.array(fc.nat(), { maxLength: 3 })),
    // Issue 43: mentions only (never with muted: one level), and the last activity, mostly 0.
    mentionsOnly: fc.boolean(),
    at: fc.oneof(fc.constant(0), fc.maxSafeNat()),
    // Issue 43: non-counting seqs, mostly none.
    nocountSeqs: fc.oneof(fc.constant<number[]>([]), fc.array(fc.nat(), { minLength: 1, maxLength: 3 })),
  })
  .map((r) => (r.muted ? { ...r, mentionsOnly: false } : r));

/** What decoding gives: the record, or that it throws. */
function outcome(decode: () => StoredConv): StoredConv | 'throws' {
  try {
    return decode();
  } catch {
    return 'throws';
  }
}

describe('record texts', () => {
  it('encodeRecord writes the record format, and decodeRecord reads it back', async () => {
    await fc.assert(
      fc.property(recArb, (rec) => {
        expect(encodeRecord(rec)).toMatch(/^[01][012][01][01]\|\d+\|\d+\|-?\d+\|\d+\|\d+\|[^|]*\|[\d,]*(\|\d+\|[\d,]*(\|\d+(\|[\d,]+)?)?)?$/);
        expect(decodeRecord(rec.conv, encodeRecord(rec))).toEqual(rec);
      }),
    );
  });

  it('decodeRecordFast decodes what decodeRecord decodes, and throws where it throws', async () => {
    // Valid texts, valid texts with one character changed, and short junk made of the format's characters.
    const junkArb = fc.string({ unit: fc.constantFrom('0', '1', '9', '|', ',', '-', '+', '.', 'e', 'x', ' '), maxLength: 40 });
    const textArb = fc.oneof(
      recArb.map(encodeRecord),
      fc.tuple(recArb.map(encodeRecord), fc.nat(), fc.constantFrom('|', ',', '-', '', '0', 'a', '.')).map(([t, i, c]) => {
        const at = i % (t.length + 1);
        return t.slice(0, at) + c + t.slice(at + 1);
      }),
      junkArb,
    );
    await fc.assert(
      fc.property(textArb, (text) => {
        expect(outcome(() => decodeRecordFast('c1', text))).toEqual(outcome(() => decodeRecord('c1', text)));
      }),
      { numRuns: 2000 },
    );
  });
});
