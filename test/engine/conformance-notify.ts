import { describe, expect, it, vi } from 'vitest';
import type { HeadChange, UserChange } from '../../server/engine/notifications.js';
import type { UseEngine } from './conformance.js';
import { join, message, read, recordOne } from './conformance-helpers.js';

const WAIT = { timeout: 5_000, interval: 5 };

/** The change feed: what a process hears of the users and large groups it follows. */
export function notificationConformance(use: UseEngine): void {
  describe('notifications', () => {
    it('a followed user hears every change, in version order, with the state and arrival time', async () => {
      const e = await use();
      const heard: UserChange[] = [];
      e.notifications.setHandler({ userChanged: (c) => heard.push(...c), headChanged: () => undefined });
      await e.notifications.followUser('u');
      const results = await e.applyUserOps([join('u', 'c'), message('u', 'c', 2), message('u', 'c', 2), join('w', 'c'), read('u', 'c', 1)], { at: 1234.5 });
      await e.applyUserOps([message('u', 'c', 3)]);
      await vi.waitFor(() => expect(heard).toHaveLength(4), WAIT);
      const epoch = results[0]?.epoch;
      expect(heard.map((c) => [c.uid, c.conv, c.epoch, c.version, c.state?.lastSeq, c.state?.readSeq])).toEqual([
        ['u', 'c', epoch, 1, 0, 0],
        ['u', 'c', epoch, 2, 2, 0],
        ['u', 'c', epoch, 3, 2, 1],
        ['u', 'c', epoch, 4, 3, 1],
      ]);
      expect(heard.slice(0, 3).map((c) => c.at)).toEqual([1234.5, 1234.5, 1234.5]);
      expect(heard[3]?.at).toBeUndefined();
      expect(heard[2]?.state).toEqual(results[4]?.state);
    });

    it('after unfollow nothing more is heard of that user; interest is counted', async () => {
      const e = await use();
      const heard: UserChange[] = [];
      e.notifications.setHandler({ userChanged: (c) => heard.push(...c), headChanged: () => undefined });
      await e.notifications.followUser('u');
      await e.notifications.followUser('u');
      e.notifications.unfollowUser('u');
      await e.applyUserOps([join('u', 'c')]);
      await vi.waitFor(() => expect(heard).toHaveLength(1), WAIT);
      e.notifications.unfollowUser('u');
      await e.applyUserOps([message('u', 'c', 1)]);
      // A later change of another followed user proves delivery went on meanwhile.
      await e.notifications.followUser('z');
      await e.applyUserOps([join('z', 'c')]);
      await vi.waitFor(() => expect(heard.map((c) => c.uid)).toContain('z'), WAIT);
      expect(heard.filter((c) => c.uid === 'u')).toHaveLength(1);
    });

    it('a followed large group hears each raised head; write-diffused ones and lower seqs are silent', async () => {
      const e = await use();
      const heads: HeadChange[] = [];
      e.notifications.setHandler({ userChanged: () => undefined, headChanged: (h) => heads.push(h) });
      await e.changeMembers('g', { add: ['a', 'b'], remove: [], threshold: 1 });
      await e.changeMembers('small', { add: ['a'], remove: [], threshold: 10 });
      await e.notifications.followConversation('g');
      await e.notifications.followConversation('small');
      await recordOne(e, 'small', 9, []);
      await recordOne(e, 'g', 5, [], 99.25);
      await recordOne(e, 'g', 3, []);
      await recordOne(e, 'g', 6, []);
      await vi.waitFor(() => expect(heads).toHaveLength(2), WAIT);
      expect(heads).toEqual([
        { conv: 'g', maxSeq: 5, at: 99.25 },
        { conv: 'g', maxSeq: 6 },
      ]);
    });

    it("a large group's head push carries what its messages add: at, @all seqs that count, seqs that stop counting (a late recall too)", async () => {
      const e = await use();
      const heads: HeadChange[] = [];
      e.notifications.setHandler({ userChanged: () => undefined, headChanged: (h) => heads.push(h) });
      await e.changeMembers('g', { add: ['a'], remove: [], threshold: 10 });
      await e.recordMessages([{ conv: 'g', seq: 2, candidates: ['a'] }]);
      // Read-diffused from head 2 on: an @all at or below 2 was a write-diffused message.
      await e.changeMembers('g', { add: ['b'], remove: [], threshold: 1 });
      await e.notifications.followConversation('g');
      await e.recordMessages([{ conv: 'g', seq: 4, candidates: ['a'], at: 1_700_000_000_000, mentionAll: [2, 4, 3], nocount: [4, 1] }], 5.5);
      // Below the head: no new head, but a recall (and a time) the members' counts need.
      await e.recordMessages([{ conv: 'g', seq: 3, candidates: ['b'], nocount: [3] }]);
      // A redelivery without anything new is silent; so is one whose only @all is at or below the floor.
      await e.recordMessages([{ conv: 'g', seq: 4, candidates: ['a'] }]);
      await e.recordMessages([{ conv: 'g', seq: 4, candidates: ['a'], mentionAll: [2] }]);
      await e.recordMessages([{ conv: 'g', seq: 5, candidates: ['a'] }]);
      await vi.waitFor(() => expect(heads).toHaveLength(3), WAIT);
      expect(heads).toEqual([
        { conv: 'g', maxSeq: 4, at: 5.5, headAt: 1_700_000_000_000, mentionAll: [3, 4], nocount: [1, 4] },
        { conv: 'g', maxSeq: 4, nocount: [3] },
        { conv: 'g', maxSeq: 5 },
      ]);
    });
  });
}
