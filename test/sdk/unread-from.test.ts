import { describe, expect, it } from 'vitest';
import type { ReadFrame, UnreadFromFrame } from '../../protocol/frames.js';
import { sdkSuite } from './harness.js';
import { newTap } from './tap.js';
import { convergedTo, unreadOf, until } from './wait.js';

const { h, started } = sdkSuite();

/** `name` with 10 messages from the peer, the 4th and 8th mentioning `${name}-me`. */
async function dm(name: string): Promise<void> {
  await h.members(name, { add: [`${name}-me`, `${name}-peer`] });
  for (let seq = 1; seq <= 10; seq++)
    await h.post({ conv: name, seq, sender: `${name}-peer`, ...(seq === 4 || seq === 8 ? { mentions: [`${name}-me`] } : {}) });
}

describe('markUnreadFrom', () => {
  it('shows at once, reaches the server in a new read generation, and another device sees readSeq go down', async () => {
    await dm('u1');
    const tap = newTap();
    const phone = await started('u1-me', tap);
    const laptop = await started('u1-me');
    phone.markRead('u1');
    await convergedTo(h, phone, 'u1-me');
    await until(laptop, (s) => unreadOf(s, 'u1') === 0, 'the read on the laptop');

    const done = phone.markUnreadFrom('u1', 6);
    expect(phone.conversation('u1')).toMatchObject({ readSeq: 5, unread: 5 });
    await done;
    const sent = tap.sent.filter((s): s is { frame: UnreadFromFrame; at: number } => s.frame.t === 'unread-from');
    expect(sent.map((s) => [s.frame.conv, s.frame.seq, s.frame.gen])).toEqual([['u1', 6, 1]]);
    await convergedTo(h, phone, 'u1-me');
    await until(laptop, (s) => unreadOf(s, 'u1') === 5, 'the unread-from on the laptop');
    // The mention at 8 counts again, on both.
    expect(laptop.conversation('u1')).toMatchObject({ readSeq: 5, mentions: 1 });
    expect(phone.conversation('u1')).toMatchObject({ readSeq: 5, mentions: 1 });
    expect((await h.unread('u1-me')).conversations.find((c) => c.conv === 'u1')).toMatchObject({ readSeq: 5, unread: 5, mentions: 1 });

    // A read made after it (in its generation) raises again, on the server too.
    phone.markRead('u1', 7);
    await convergedTo(h, phone, 'u1-me');
    expect(phone.conversation('u1')).toMatchObject({ readSeq: 7, unread: 3 });
    const reads = tap.sent.filter((s): s is { frame: ReadFrame; at: number } => s.frame.t === 'read').map((s) => s.frame.reads);
    expect(reads.at(-1)).toEqual([['u1', 7, 1]]);
  });

  it("a read a device made before it saw another device's unread-from is ignored by the server: both end where the unread-from put them", async () => {
    await dm('u2');
    const phone = await started('u2-me');
    const laptop = await started('u2-me');
    // The laptop reads everything; its report waits in the batch window (500 ms) ...
    laptop.markRead('u2');
    expect(unreadOf(laptop.state, 'u2')).toBe(0);
    // ... while the phone marks unread from 3, and the server has that first.
    await phone.markUnreadFrom('u2', 3);
    laptop.flushReads();
    await convergedTo(h, laptop, 'u2-me');
    await convergedTo(h, phone, 'u2-me');
    expect((await h.unread('u2-me')).conversations.find((c) => c.conv === 'u2')).toMatchObject({ readSeq: 2, unread: 8, mentions: 2 });
    expect(laptop.conversation('u2')).toMatchObject({ readSeq: 2, unread: 8 });
    expect(phone.conversation('u2')).toMatchObject({ readSeq: 2, unread: 8 });
  });

  it('refuses a seq below 1 without sending anything', async () => {
    await dm('u3');
    const tap = newTap();
    const c = await started('u3-me', tap);
    await expect(c.markUnreadFrom('u3', 0)).rejects.toThrow(RangeError);
    expect(tap.sent.some((s) => s.frame.t === 'unread-from')).toBe(false);
  });
});
