import { describe, expect, it } from 'vitest';
import type { ServerFrame, SettingsFrame } from '../../protocol/frames.js';
import { sdkSuite } from './harness.js';
import { recordingTimers } from './recording-timers.js';
import { newTap, type Tap } from './tap.js';
import { convergedTo, unreadOf, until } from './wait.js';

/** The client's side of PROTOCOL.md's rules on errors and settings, against the real server. */
const { h, started, client } = sdkSuite();

const settingsFrames = (tap: Tap) => tap.sent.map((s) => s.frame).filter((f): f is SettingsFrame => f.t === 'settings');

describe('errors', () => {
  it("an error without an id after welcome (the hello's sync failed) is answered with pulls that back off", async () => {
    await h.members('c1-dm', { add: ['c1-me', 'c1-peer'] });
    await h.post({ conv: 'c1-dm', seq: 1, sender: 'c1-peer' });
    let failures = 0;
    const tap = newTap((frame: ServerFrame, deliver) => {
      // The hello's sync and the first pull fail as a server with its store down answers them.
      if (frame.t === 'sync' && failures < 2) {
        failures += 1;
        return deliver({ t: 'error', ...(frame.id !== undefined ? { id: frame.id } : {}), code: 'unavailable', message: 'test: store down' });
      }
      deliver();
    });
    const timers = recordingTimers();
    const c = await started('c1-me', tap, { retryMs: 100, random: () => 0.999, timers });
    expect(unreadOf(c.state, 'c1-dm')).toBe(1);
    const pulls = tap.sent.filter((s) => s.frame.t === 'pull');
    expect(pulls).toHaveLength(2);
    // Full jitter under a cap that doubles: 100 ms, then 200 ms (random 0.999 takes the top).
    expect(timers.delays.filter((ms) => ms === 99 || ms === 199)).toEqual([99, 199]);
  });

  it('a read refused as rate_limited (the error carries its id) is sent again and lands', async () => {
    await h.members('c2-dm', { add: ['c2-me', 'c2-peer'] });
    await h.post({ conv: 'c2-dm', seq: 2, sender: 'c2-peer' });
    let refused = false;
    const tap = newTap((frame: ServerFrame, deliver) => {
      if (frame.t === 'ack' && !refused) {
        refused = true;
        return deliver({ t: 'error', id: frame.id, code: 'rate_limited', message: 'test: slow down' });
      }
      deliver();
    });
    const c = await started('c2-me', tap, { retryMs: 50, readBatchMs: 10 });
    c.markRead('c2-dm');
    await convergedTo(h, c, 'c2-me');
    expect(tap.sent.filter((s) => s.frame.t === 'read')).toHaveLength(2);
    expect(unreadOf(c.state, 'c2-dm')).toBe(0);
  });
});

describe('settings', () => {
  it('two changes of one conversation: the first ack does not take back the second before its push', async () => {
    await h.members('c3-dm', { add: ['c3-me', 'c3-peer'] });
    await h.post({ conv: 'c3-dm', seq: 1, sender: 'c3-peer' });
    const held: Array<() => void> = [];
    let hold = true;
    const tap = newTap((frame, deliver) => {
      const second = settingsFrames(tap).find((f) => f.markedUnread === true);
      const isSecondAck = frame.t === 'ack' && frame.id === second?.id;
      const isSecondPush = frame.t === 'change' && frame.state?.markedUnread === true;
      if (hold && (isSecondAck || isSecondPush)) held.push(() => deliver());
      else deliver();
    });
    const c = await started('c3-me', tap);
    const marks: boolean[] = [];
    c.on('change', (s) => marks.push(s.conversations.find((v) => v.conv === 'c3-dm')?.markedUnread ?? false));
    const muted = c.mute('c3-dm');
    const marked = c.markUnread('c3-dm');
    await muted;
    const muteId = settingsFrames(tap)[0]?.id;
    const muteAck = tap.received.map((r) => r.frame).find((f) => f.t === 'ack' && f.id === muteId);
    if (muteAck?.t !== 'ack') throw new Error('no ack for the mute');
    // The mute's push arrived (the cursor reached its ack) while the second change is held back.
    await until(c, (s) => (s.cursor?.version ?? 0) >= muteAck.version && held.length === 2, 'the mute pushed, the mark held back');
    expect(c.conversation('c3-dm')?.markedUnread).toBe(true);
    hold = false;
    for (const release of held.splice(0)) release();
    await marked;
    await convergedTo(h, c, 'c3-me');
    expect(marks.every(Boolean)).toBe(true);
    expect(c.conversation('c3-dm')).toMatchObject({ muted: true, markedUnread: true });
  });

  it('settings made offline are sent after the reconnect, in order', async () => {
    await h.members('c4-dm', { add: ['c4-me', 'c4-peer'] });
    await h.post({ conv: 'c4-dm', seq: 3, sender: 'c4-peer' });
    const c = client('c4-me', { backoff: { baseMs: 20, maxMs: 100 } });
    await c.start();
    await convergedTo(h, c, 'c4-me');
    await h.down();
    await until(c, (s) => s.connection === 'offline', 'offline');
    const done = Promise.all([c.mute('c4-dm'), c.markUnread('c4-dm'), c.deleteConversation('c4-dm')]);
    expect(c.state.conversations).toEqual([]);
    await h.up();
    await done;
    await convergedTo(h, c, 'c4-me');
    expect(c.state.conversations).toEqual([]);
    await h.post({ conv: 'c4-dm', seq: 4, sender: 'c4-peer' });
    const back = await convergedTo(h, c, 'c4-me');
    expect(back.conversations[0]).toMatchObject({ conv: 'c4-dm', unread: 1, muted: true, markedUnread: false });
  });
});
