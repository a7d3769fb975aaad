import { describe, expect, it } from 'vitest';
import { lastActive, timeAgo } from '../../client-demo/app/time-ago.js';

/** The chat list's times (client-demo/app/time-ago.ts), against a fixed "now" in local time. */
const now = new Date(2026, 11, 10, 15, 30).getTime(); // Thursday 10 December 2026, 15:30
const at = (day: number, hour: number, minute = 0): number => new Date(2026, 11, day, hour, minute).getTime();

describe('timeAgo', () => {
  it('reads like a chat list: now, minutes, hours today, yesterday, a weekday, a date', () => {
    expect(timeAgo(now - 20_000, now)).toBe('now');
    expect(timeAgo(now - 5 * 60_000, now)).toBe('5 min');
    expect(timeAgo(at(10, 9, 10), now)).toBe('6 h');
    expect(timeAgo(at(9, 23, 50), now)).toBe('Yesterday');
    expect(timeAgo(at(7, 12), now)).toBe('Mon');
    expect(timeAgo(at(1, 12), now)).toBe('1 Dec');
    // A stamp from a device whose clock runs ahead is "now", never a negative time.
    expect(timeAgo(now + 30_000, now)).toBe('now');
  });

  it("the open conversation's header says it in words", () => {
    expect(lastActive(now - 20_000, now)).toBe('active just now');
    expect(lastActive(now - 14 * 60_000, now)).toBe('active 14 min ago');
    expect(lastActive(at(9, 12), now)).toBe('active yesterday');
    expect(lastActive(at(7, 12), now)).toBe('active Mon');
  });
});
