import { describe, expect, it } from 'vitest';
import type { RedpointClient } from '../../client-demo/sdk/src/index.js';
import type { AckFrame, ReadFrame, ServerFrame } from '../../protocol/frames.js';
import { expectWithin } from '../helpers/bound.js';
import { sdkSuite } from './harness.js';
import { recordingTimers } from './recording-timers.js';
import { newTap, type Tap } from './tap.js';
import { convergedTo, unreadOf, until } from './wait.js';

const { h, started } = sdkSuite();

const readFrames = (tap: Tap) => tap.sent.filter((s): s is { frame: ReadFrame; at: number } => s.frame.t === 'read');

/** Every unread count `conv` shows from now on. */
function history(c: RedpointClient, conv: string): number[] {
  const seen: number[] = [];
  c.on('change', (s) => {
    const n = unreadOf(s, conv);
    if (n !== undefined && seen.at(-1) !== n) seen.push(n);
  });
  return seen;
}

async function dm(name: string, unread: number): Promise<void> {
  await h.members(name, { add: [`${name}-me`, `${name}-peer`] });
  for (let seq = 1; seq <= unread; seq++) await h.post({ conv: name, seq, sender: `${name}-peer` });
}

describe('optimistic reads', () => {
  it('clears the dot at once; a newer message brings it back with the right number', async () => {
    await dm('r1', 3);
    const tap = newTap();
    const c = await started('r1-me', tap);
    expect(unreadOf(c.state, 'r1')).toBe(3);
    const seen = history(c, 'r1');
    c.markRead('r1');
    expect(unreadOf(c.state, 'r1')).toBe(0);
    expect(c.state.status).toBe('PENDING');
    expect(c.conversation('r1')?.pending).toBe(true);
    // Message 4 lands before the read report leaves (it is batched for 500 ms): the server
    // still says readSeq 0, lastSeq 4. The client must show 1, not 4.
    await h.post({ conv: 'r1', seq: 4, sender: 'r1-peer' });
    await until(c, (s) => s.conversations.find((v) => v.conv === 'r1')?.lastSeq === 4, 'message 4');
    expect(unreadOf(c.state, 'r1')).toBe(1);
    expect(readFrames(tap)).toHaveLength(0);
    await convergedTo(h, c, 'r1-me');
    expect(unreadOf(c.state, 'r1')).toBe(1);
    expect(seen).toEqual([0, 1]);
  });

  it('a server state from before the read (another device muting) never brings the dot back', async () => {
    await dm('r2', 2);
    const c = await started('r2-me');
    const seen = history(c, 'r2');
    c.markRead('r2');
    await h.ok('PUT', '/v1/users/r2-me/conversations/r2', { muted: true });
    await until(c, (s) => s.conversations.find((v) => v.conv === 'r2')?.muted === true, 'the mute from the other device');
    await convergedTo(h, c, 'r2-me');
    expect(seen).toEqual([0]);
  });

  it('acks that come back out of order are matched by id', async () => {
    await dm('r3a', 2);
    await h.members('r3b', { add: ['r3a-me', 'r3b-peer'] });
    await h.post({ conv: 'r3b', seq: 1, sender: 'r3b-peer' });
    let firstAck: (() => void) | undefined;
    let acks = 0;
    const order: number[] = [];
    const tap = newTap((frame: ServerFrame, deliver) => {
      if (frame.t !== 'ack') return deliver();
      acks += 1;
      if (acks === 1) {
        firstAck = () => {
          order.push((frame as AckFrame).id);
          deliver();
        };
        return;
      }
      order.push(frame.id);
      deliver();
      firstAck?.();
    });
    const c = await started('r3a-me', tap);
    c.markRead('r3a');
    c.flushReads();
    c.markRead('r3b');
    c.flushReads();
    const [first, second] = readFrames(tap).map((r) => r.frame.id);
    await convergedTo(h, c, 'r3a-me');
    expect(order).toEqual([second, first]);
    expect(c.state.conversations.every((v) => !v.pending && v.unread === 0)).toBe(true);
  });

  it('"mark as unread" then read: the read clears the marked dot too', async () => {
    await dm('r4', 1);
    const c = await started('r4-me');
    c.markRead('r4');
    await convergedTo(h, c, 'r4-me');
    await c.markUnread('r4');
    await convergedTo(h, c, 'r4-me');
    expect(c.conversation('r4')?.markedUnread).toBe(true);
    c.markRead('r4');
    expect(c.conversation('r4')?.markedUnread).toBe(false);
    await convergedTo(h, c, 'r4-me');
    expect(c.conversation('r4')?.markedUnread).toBe(false);
  });
});

describe('read batching', () => {
  it('20 conversations read at once go out as one frame, immediately', async () => {
    const convs = Array.from({ length: 20 }, (_, i) => `b1-c${i}`);
    for (const conv of convs) {
      await h.members(conv, { add: ['b1-me', 'b1-peer'] });
      await h.post({ conv, seq: 1, sender: 'b1-peer' });
    }
    const tap = newTap();
    const c = await started('b1-me', tap);
    const t0 = performance.now();
    for (const conv of convs) c.markRead(conv);
    const frames = readFrames(tap);
    expect(frames).toHaveLength(1);
    expect(frames[0]?.frame.reads).toHaveLength(20);
    // Sent at once (checked above, synchronously); the figure for the record.
    expectWithin('20 reads sent', (frames[0]?.at ?? Infinity) - t0, 50);
    expect(c.state.totals?.total).toBe(0);
    await convergedTo(h, c, 'b1-me');
    expect(readFrames(tap)).toHaveLength(1);
  });

  it('fewer reads go out together 500 ms after the first', async () => {
    for (const conv of ['b2-x', 'b2-y', 'b2-z']) {
      await h.members(conv, { add: ['b2-me', 'b2-peer'] });
      await h.post({ conv, seq: 1, sender: 'b2-peer' });
    }
    const tap = newTap();
    const timers = recordingTimers();
    const c = await started('b2-me', tap, { timers });
    const t0 = performance.now();
    c.markRead('b2-x');
    c.markRead('b2-y');
    c.markRead('b2-x');
    c.markRead('b2-z');
    expect(readFrames(tap)).toHaveLength(0);
    await until(c, (s) => s.status === 'SYNCED', 'acked');
    const frames = readFrames(tap);
    expect(frames).toHaveLength(1);
    expect(frames[0]?.frame.reads.map(([conv]) => conv).sort()).toEqual(['b2-x', 'b2-y', 'b2-z']);
    // One 500 ms batch timer, and it is what sent them (the delay the client chose, which load
    // cannot move); the wall clock no earlier than it, and within it plus a loaded machine's slack.
    expect(timers.withDelay(500).map((t) => t.state)).toEqual(['fired']);
    const waited = (frames[0]?.at ?? 0) - t0;
    expect(waited).toBeGreaterThanOrEqual(480);
    expectWithin('3 reads sent after the batch delay', waited, 500);
  });

  it('a read whose ack was lost with the connection is sent again after reconnecting', async () => {
    await dm('b3', 2);
    let dropAcks = true;
    const tap = newTap((frame, deliver) => {
      if (frame.t === 'ack' && dropAcks) {
        dropAcks = false;
        tap.sockets.at(-1)?.terminate();
        return;
      }
      deliver();
    });
    const c = await started('b3-me', tap, { backoff: { baseMs: 20, maxMs: 100 } });
    c.markRead('b3');
    c.flushReads();
    await until(c, (s) => s.connection === 'offline', 'offline');
    expect(c.state.status).not.toBe('SYNCED');
    expect(unreadOf(c.state, 'b3')).toBe(0);
    await convergedTo(h, c, 'b3-me');
    expect(readFrames(tap).length).toBe(2);
    expect(tap.sockets.length).toBe(2);
  });
});
