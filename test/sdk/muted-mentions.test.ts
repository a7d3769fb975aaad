import { describe, expect, it } from 'vitest';
import { sdkSuite } from './harness.js';
import { convergedTo, until } from './wait.js';

/**
 * `client.setMutedMentions` (PROTOCOL.md "Notification levels"): the user's setting goes over the
 * socket as a `user-settings` frame, queued with the other settings; the server starts the user's
 * stream over, and every device sums its totals with the setting of the reply it pulls then.
 */
const { h, started } = sdkSuite();

describe('setMutedMentions on the SDK', () => {
  it('a muted conversation with an unread mention: both devices count it once the setting is on, and not once it is off', async () => {
    await h.members('mm-dm', { add: ['mm-me', 'mm-p'] });
    await h.ok('PUT', '/v1/users/mm-me/conversations/mm-dm', { level: 'none' });
    await h.post([
      { conv: 'mm-dm', seq: 1, sender: 'mm-p' },
      { conv: 'mm-dm', seq: 2, sender: 'mm-p', mentions: ['mm-me'] },
    ]);
    const phone = await started('mm-me');
    const laptop = await started('mm-me');
    expect([phone.state.mutedMentions, phone.state.totals?.total]).toEqual([false, 0]);

    await phone.setMutedMentions(true);
    expect(await h.ok('GET', '/v1/users/mm-me/settings')).toEqual({ uid: 'mm-me', shareReads: true, mutedMentions: true });
    for (const device of [phone, laptop]) {
      await until(device, (s) => s.mutedMentions && s.totals?.total === 1 && s.totals.mentions === 1, 'the setting on');
      await convergedTo(h, device, 'mm-me');
    }
    // The row is unchanged: still muted, its unread the same.
    expect(laptop.state.conversations[0]).toMatchObject({ conv: 'mm-dm', muted: true, unread: 2, mentions: 1 });

    await laptop.setMutedMentions(false);
    for (const device of [phone, laptop]) await until(device, (s) => !s.mutedMentions && s.totals?.total === 0, 'the setting off');
  });

  it('a setting made while offline goes once the socket is back, and resolves then', async () => {
    await h.members('mm-off', { add: ['mm-me2', 'mm-p'] });
    await h.ok('PUT', '/v1/users/mm-me2/conversations/mm-off', { muted: true });
    await h.post({ conv: 'mm-off', seq: 1, sender: 'mm-p', mentions: ['mm-me2'] });
    const c = await started('mm-me2');
    await h.down();
    await until(c, (s) => s.connection !== 'open', 'offline');
    const sent = c.setMutedMentions(true);
    expect(c.state.status).not.toBe('SYNCED');
    await h.up();
    await sent;
    await until(c, (s) => s.mutedMentions && s.totals?.total === 1 && s.status === 'SYNCED', 'the setting on after the reconnect');
  });
});
