import { describe, expect, it } from 'vitest';
import { errorReason, FailureReasons, replyReason } from '../../bench/lib/failures.js';

describe('bench FailureReasons', () => {
  it('counts by reason, most frequent first', () => {
    const f = new FailureReasons();
    f.reply({ status: 503, body: '{"error":"unavailable","message":"store timeout"}' });
    f.error(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', reusedSocket: true, replyStarted: false }));
    f.error(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', reusedSocket: true, replyStarted: false }));
    f.add('still in flight', 0);
    expect(f.total).toBe(3);
    expect(f.summary()).toBe('2 × ECONNRESET (reused socket, no reply byte), 1 × 503 {"error":"unavailable","message":"store timeout"}');
  });

  it('keeps about 100 bytes of a body, and the message of an error without a code', () => {
    expect(replyReason({ status: 500, body: `{"x":"${'a'.repeat(300)}"}` })).toBe(`500 {"x":"${'a'.repeat(94)}…`);
    expect(replyReason({ status: 502, body: '' })).toBe('502');
    expect(errorReason(new Error('POST /v1/messages: no reply within 10000 ms'))).toBe('POST /v1/messages: no reply within 10000 ms');
  });
});
