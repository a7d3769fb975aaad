import { describe, expect, it } from 'vitest';
import { sdkSuite } from './harness.js';

/** The SDK's read receipts (PROTOCOL.md "Read receipts") against the real server: peerRead and readBy, from pulls and `reads` pushes. */
const { h, started } = sdkSuite({ config: { receipts: { pushIntervalMs: 100, detailMembers: 30, onSend: false } } });

const waitFor = async (check: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 5000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('read receipts in the SDK', () => {
  it("a one-to-one peer's read arrives from the first sync and from pushes, with a receipts event; readBy counts a small group's readers", async () => {
    await h.members('rc-dm', { add: ['rc-me', 'rc-peer'] });
    await h.members('rc-g', { add: ['rc-me', 'rc-a', 'rc-b'] });
    await h.post([1, 2, 3].map((seq) => ({ conv: 'rc-dm', seq, sender: 'rc-me' })));
    await h.post([1, 2].map((seq) => ({ conv: 'rc-g', seq, sender: 'rc-me' })));
    await h.ok('POST', '/v1/users/rc-peer/read', { conv: 'rc-dm', seq: 1 });
    const c = await started('rc-me');
    expect(c.peerRead('rc-dm')).toBe(1);
    expect(c.peerRead('rc-g')).toBeUndefined();
    const events: string[] = [];
    c.on('receipts', (e) => events.push(e.conv));
    await h.ok('POST', '/v1/users/rc-peer/read', { conv: 'rc-dm', seq: 3 });
    await waitFor(() => c.peerRead('rc-dm') === 3, 'the peer read pushed');
    expect(events).toContain('rc-dm');
    await h.ok('POST', '/v1/users/rc-a/read', { conv: 'rc-g', seq: 2 });
    await h.ok('POST', '/v1/users/rc-b/read', { conv: 'rc-g', seq: 1 });
    await waitFor(() => c.readBy('rc-g', 1) === 2, 'both group reads pushed');
    expect(c.readBy('rc-g', 2)).toBe(1);
    expect(c.readBy('rc-g', 3)).toBe(0);
  });
});
