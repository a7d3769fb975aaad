import { describe, expect, it } from 'vitest';
import { RedpointError } from '../../protocol/errors.js';
import { retryDelay } from '../../server/queue/outcome.js';
import { decodeRecord, parseRecordBytes } from '../../server/queue/record.js';

const refusal = (value: unknown): string => {
  try {
    decodeRecord(value);
  } catch (err) {
    if (err instanceof RedpointError) return `${err.code}: ${err.message}`;
    throw err;
  }
  throw new Error(`accepted: ${JSON.stringify(value)}`);
};

describe('queue records', () => {
  it('decodes each type into the write it stands for', () => {
    expect(decodeRecord({ type: 'message', conv: 'c', seq: 3, sender: 'a', mentions: ['b'] })).toEqual({
      type: 'message',
      message: { conv: 'c', seq: 3, sender: 'a', mentions: ['b'] },
    });
    expect(decodeRecord({ type: 'members', conv: 'c', add: ['a'], category: 'group' })).toEqual({
      type: 'members',
      conv: 'c',
      add: ['a'],
      remove: [],
      category: 'group',
    });
    expect(decodeRecord({ type: 'read', uid: 'a', conv: 'c', seq: 0 })).toEqual({ type: 'read', uid: 'a', conv: 'c', seq: 0 });
    // The read generation it was made in goes through to the read (PROTOCOL.md "Unread from here").
    expect(decodeRecord({ type: 'read', uid: 'a', conv: 'c', seq: 4, gen: 2 })).toEqual({ type: 'read', uid: 'a', conv: 'c', seq: 4, gen: 2 });
    expect(decodeRecord({ type: 'settings', uid: 'a', conv: 'c', muted: true })).toEqual({ type: 'settings', uid: 'a', conv: 'c', muted: true });
    expect(decodeRecord({ type: 'delete', uid: 'a', conv: 'c' })).toEqual({ type: 'delete', uid: 'a', conv: 'c' });
  });

  it('topics (PROTOCOL.md "Topics"): a message\'s topic goes through; user records name a topic\'s id, a members record may not', () => {
    expect(decodeRecord({ type: 'message', conv: 'c', topic: 't', seq: 1, sender: 'a' })).toEqual({
      type: 'message',
      message: { conv: 'c', topic: 't', seq: 1, sender: 'a' },
    });
    expect(decodeRecord({ type: 'read', uid: 'a', conv: 'c#t:t', seq: 1 })).toEqual({ type: 'read', uid: 'a', conv: 'c#t:t', seq: 1 });
    expect(decodeRecord({ type: 'settings', uid: 'a', conv: 'c#t:t', muted: true })).toEqual({ type: 'settings', uid: 'a', conv: 'c#t:t', muted: true });
    expect(decodeRecord({ type: 'delete', uid: 'a', conv: 'c#t:t' })).toEqual({ type: 'delete', uid: 'a', conv: 'c#t:t' });
    expect(refusal({ type: 'members', conv: 'c#t:t', add: ['a'] })).toMatch(/^invalid_request: \/conv/);
    expect(refusal({ type: 'message', conv: 'c#t:t', seq: 1, sender: 'a' })).toMatch(/^invalid_request: \/conv/);
    expect(refusal({ type: 'message', conv: 'c', topic: 'x'.repeat(65), seq: 1, sender: 'a' })).toMatch(/^invalid_request: \/topic/);
  });

  it('threads (PROTOCOL.md "Threads"): a reply\'s thread and root sender go through; user records name a thread\'s id', () => {
    expect(decodeRecord({ type: 'message', conv: 'c', thread: 4, rootSender: 'b', seq: 1, sender: 'a' })).toEqual({
      type: 'message',
      message: { conv: 'c', thread: 4, rootSender: 'b', seq: 1, sender: 'a' },
    });
    expect(decodeRecord({ type: 'read', uid: 'a', conv: 'c#r:4', seq: 1 })).toEqual({ type: 'read', uid: 'a', conv: 'c#r:4', seq: 1 });
    expect(decodeRecord({ type: 'settings', uid: 'a', conv: 'c#r:4', level: 'all' })).toEqual({ type: 'settings', uid: 'a', conv: 'c#r:4', level: 'all' });
    expect(refusal({ type: 'message', conv: 'c', thread: 0, seq: 1, sender: 'a' })).toMatch(/^invalid_request: \/thread/);
    expect(refusal({ type: 'read', uid: 'a', conv: 'c#r:0', seq: 1 })).toMatch(/^invalid_request: \/conv/);
    expect(refusal({ type: 'read', uid: 'a', conv: 'c#r:x', seq: 1 })).toMatch(/^invalid_request: \/conv/);
  });

  it('refuses what the HTTP API refuses, naming the field', () => {
    expect(refusal(null)).toMatch(/^invalid_request: \(record\): not a JSON object/);
    expect(refusal([1])).toMatch(/^invalid_request: \(record\): not a JSON object/);
    expect(refusal({ conv: 'c' })).toMatch(/^invalid_request: \/type: must be one of message, members, read, settings, delete/);
    expect(refusal({ type: 'message', conv: 'c', seq: 2 ** 48 + 1, sender: 'a' })).toMatch(/^invalid_request: \/seq/);
    expect(refusal({ type: 'message', messages: [{ conv: 'c', seq: 1, sender: 'a' }] })).toMatch(/^invalid_request: /);
    expect(refusal({ type: 'members', conv: 'bad id!', add: ['a'] })).toMatch(/^invalid_request: \/conv/);
    expect(refusal({ type: 'read', uid: 'a', conv: 'c', seq: -1 })).toMatch(/^invalid_request: \/seq/);
    expect(refusal({ type: 'read', conv: 'c', seq: 1 })).toMatch(/^invalid_request: \/uid/);
    expect(refusal({ type: 'settings', uid: 'a', conv: 'c' })).toMatch(/^invalid_request: /);
    // Issue 43: the same rules for `at` and `level` as over HTTP.
    expect(refusal({ type: 'message', conv: 'c', seq: 1, sender: 'a', at: Date.now() + 2 * 86_400_000 })).toMatch(
      /^invalid_request: \/at: more than 24 h ahead/,
    );
    expect(refusal({ type: 'message', conv: 'c', seq: 1, sender: 'a', at: 5 })).toMatch(/^invalid_request: \/at/);
    expect(refusal({ type: 'settings', uid: 'a', conv: 'c', level: 'loud' })).toMatch(/^invalid_request: \/level/);
    expect(refusal({ type: 'settings', uid: 'a', conv: 'c', deleted: true })).toMatch(/^invalid_request: /);
    expect(refusal({ type: 'delete', uid: 'a', conv: 'c', seq: 1 })).toMatch(/^invalid_request: \/seq: unexpected property/);
  });

  it('parses bytes as UTF-8 JSON, or says why not', () => {
    expect(parseRecordBytes(new TextEncoder().encode('{"a":1}'))).toEqual({ a: 1 });
    expect(() => parseRecordBytes(new Uint8Array([0xff, 0xfe]))).toThrow(/not UTF-8/);
    expect(() => parseRecordBytes(new TextEncoder().encode('{'))).toThrow(/not JSON/);
  });

  it('backs off doubling from 250 ms up to 30 s, within the retry budget', () => {
    expect([1, 2, 3, 4].map((n) => retryDelay(n, 60_000))).toEqual([250, 500, 1000, 2000]);
    expect(retryDelay(12, 600_000)).toBe(30_000);
    // 250 + 500 + 1000 = 1750 ms spent after three retries: a 1.5 s budget is over.
    expect(retryDelay(4, 1_500)).toBeNull();
    expect(retryDelay(1, 0)).toBeNull();
  });
});
