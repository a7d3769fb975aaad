import { describe, expect, it } from 'vitest';
import { pushBadgeText } from '../../client-demo/app/push-badge-text.js';

describe("the demo's push service line", () => {
  const now = 1_000_000;
  it('shows the drop with its age', () => {
    expect(pushBadgeText({ event: { seq: 4, badge: { total: 1 }, previous: { total: 3 } }, receivedAt: now - 12_400 }, now)).toBe(
      'push service: badge 3 → 1, 12 s ago',
    );
  });
  it('a first event has no previous badge; minutes past one minute', () => {
    expect(pushBadgeText({ event: { seq: 1, badge: { total: 2 }, previous: null }, receivedAt: now - 125_000 }, now)).toBe('push service: badge 2, 2 min ago');
  });
  it('says so before any event', () => {
    expect(pushBadgeText(undefined, now)).toBe('push service: no badge event yet');
  });
});
