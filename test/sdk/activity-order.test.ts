import { describe, expect, it } from 'vitest';
import type { RedpointClient } from '../../client-demo/sdk/src/index.js';
import { sdkSuite } from './harness.js';
import { convergedTo, until } from './wait.js';

/**
 * Issue 43: the conversation list is ordered by the last activity the message service stamped
 * (`at`), which Redpoint keeps (per record, and beside the head for read-diffused groups), so two
 * devices of one user, whatever they saw happen, show one order. The harness's groups above 3
 * members are read-diffused.
 */
const { h, started } = sdkSuite({ largeGroupThreshold: 3 });
const T0 = 1_760_000_000_000;
const order = (c: RedpointClient): string[] => c.state.conversations.map((v) => v.conv);

describe('the last activity orders the list', () => {
  it("the list's order follows `at` on every device", async () => {
    await h.members('dm-old', { add: ['me', 'p1'] });
    await h.members('dm-new', { add: ['me', 'p2'] });
    await h.members('big', { add: ['me', 'p1', 'p2', 'p3', 'p4'] });
    // Seqs and arrival say dm-old is newest; the stamps say otherwise.
    await h.post({ conv: 'big', seq: 1, sender: 'p3', at: T0 + 2_000 });
    await h.post({ conv: 'dm-new', seq: 1, sender: 'p2', at: T0 + 3_000 });
    await h.post({ conv: 'dm-old', seq: 1, sender: 'p1', at: T0 + 1_000 });
    const phone = await started('me');
    const laptop = await started('me');
    for (const device of [phone, laptop]) await convergedTo(h, device, 'me');
    expect(order(phone)).toEqual(['dm-new', 'big', 'dm-old']);
    expect(order(laptop)).toEqual(order(phone));
    expect(phone.state.conversations.map((v) => v.at)).toEqual([T0 + 3_000, T0 + 2_000, T0 + 1_000]);
    // A newer message moves its conversation up on both; a late, older one moves nothing.
    await h.post({ conv: 'dm-old', seq: 2, sender: 'p1', at: T0 + 4_000 });
    await h.post({ conv: 'dm-new', seq: 2, sender: 'p2', at: T0 + 500 });
    for (const device of [phone, laptop]) {
      await until(device, (s) => s.conversations[0]?.conv === 'dm-old' && s.conversations.find((v) => v.conv === 'dm-new')?.lastSeq === 2, 'dm-old first');
    }
    expect(order(phone)).toEqual(['dm-old', 'dm-new', 'big']);
    expect(order(laptop)).toEqual(order(phone));
    // The server's /unread says the same times.
    const unread = await h.ok<{ conversations: { conv: string; at?: number }[] }>('GET', '/v1/users/me/unread');
    expect(Object.fromEntries(unread.conversations.map((c) => [c.conv, c.at]))).toEqual({ 'dm-old': T0 + 4_000, 'dm-new': T0 + 3_000, big: T0 + 2_000 });
  });
});

describe('notification levels on the SDK', () => {
  it('setLevel("mentions") keeps the badge at the mentions, at once and on the other device', async () => {
    await h.members('lv-group', { add: ['lv-me', 'lv-p'] });
    await h.post([
      { conv: 'lv-group', seq: 1, sender: 'lv-p' },
      { conv: 'lv-group', seq: 2, sender: 'lv-p', mentions: ['lv-me'] },
      { conv: 'lv-group', seq: 3, sender: 'lv-p' },
    ]);
    const phone = await started('lv-me');
    const laptop = await started('lv-me');
    expect(phone.state.totals).toMatchObject({ total: 3, mentions: 1 });
    const sent = phone.setLevel('lv-group', 'mentions');
    // Optimistic: the badge drops before the server answers, the row keeps its unread.
    expect(phone.state.totals).toMatchObject({ total: 1, mentions: 1 });
    expect(phone.state.conversations[0]).toMatchObject({ unread: 3, mentions: 1, level: 'mentions', muted: false });
    await sent;
    await until(laptop, (s) => s.totals?.total === 1, 'the level on the other device');
    for (const device of [phone, laptop]) await convergedTo(h, device, 'lv-me');
    await phone.setLevel('lv-group', 'none');
    await until(laptop, (s) => s.totals?.total === 0 && s.conversations[0]?.muted === true, 'muted on the other device');
  });
});
