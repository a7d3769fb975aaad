import { describe, expect, it, vi } from 'vitest';
import type { ReadsChange } from '../../server/engine/notifications.js';
import type { UseEngine } from './conformance.js';
import { recordOne } from './conformance-helpers.js';

const WAIT = { timeout: 5_000, interval: 5 };

/** Read receipts' store (read-positions.ts): the conversation registers and the per-user settings. */
export function receiptsConformance(use: UseEngine): void {
  describe('read receipts', () => {
    it('a position is a max-register: raised, never lowered; repeats change nothing', async () => {
      const e = await use();
      await e.changeMembers('d', { add: ['a', 'b'], remove: [], threshold: 10 });
      const rp = e.readPositions;
      expect(await rp.raise([{ conv: 'd', uid: 'a', seq: 5 }])).toEqual([true]);
      expect(await rp.raise([{ conv: 'd', uid: 'a', seq: 3 }])).toEqual([false]);
      expect(await rp.raise([{ conv: 'd', uid: 'a', seq: 5 }])).toEqual([false]);
      expect(
        await rp.raise([
          { conv: 'd', uid: 'b', seq: 2 },
          { conv: 'd', uid: 'a', seq: 7 },
        ]),
      ).toEqual([true, true]);
      const reads = (await rp.read(['d', 'missing'], { upTo: 2 })).get('d');
      expect(reads?.positions).toEqual(
        new Map([
          ['a', 7],
          ['b', 2],
        ]),
      );
      expect(reads).toMatchObject({ memberCount: 2, large: false, member: false, own: null, counts: [] });
      expect((await rp.read(['missing'], { upTo: 2 })).size).toBe(0);
    });

    it('only members are recorded: a non-member, or one who left, is not', async () => {
      const e = await use();
      await e.changeMembers('d', { add: ['a', 'b'], remove: [], threshold: 10 });
      const rp = e.readPositions;
      expect(await rp.raise([{ conv: 'd', uid: 'x', seq: 5 }])).toEqual([false]);
      expect(await rp.raise([{ conv: 'nope', uid: 'a', seq: 5 }])).toEqual([false]);
      await e.changeMembers('d', { add: [], remove: ['b'], threshold: 10 });
      expect(await rp.raise([{ conv: 'd', uid: 'b', seq: 5 }])).toEqual([false]);
      expect([...((await rp.read(['d'], { upTo: 5 })).get('d')?.positions.keys() ?? [])]).toEqual([]);
    });

    it('drop removes a position; counts, own position, membership and head come with a read', async () => {
      const e = await use();
      await e.changeMembers('g', { add: ['a', 'b', 'c', 'd'], remove: [], threshold: 10 });
      await recordOne(e, 'g', 9, []);
      const rp = e.readPositions;
      await rp.raise([
        { conv: 'g', uid: 'a', seq: 9 },
        { conv: 'g', uid: 'b', seq: 4 },
        { conv: 'g', uid: 'c', seq: 6 },
      ]);
      const all = (await rp.read(['g'], { upTo: 30, seqs: [3, 5, 9, 10], member: 'a' })).get('g');
      expect(all).toMatchObject({ memberCount: 4, large: false, maxSeq: 9, counts: [3, 2, 1, 0], member: true, own: 9 });
      expect(all?.positions.size).toBe(3);
      // Above upTo members: counts only.
      const few = (await rp.read(['g'], { upTo: 3, seqs: [5], member: 'x' })).get('g');
      expect(few).toMatchObject({ counts: [2], member: false, own: null });
      expect(few?.positions.size).toBe(0);
      await rp.drop('c', ['g', 'nope']);
      expect((await rp.read(['g'], { upTo: 30, seqs: [5] })).get('g')?.counts).toEqual([1]);
    });

    it("peers: in each conversation of exactly 2 members, the other member's position", async () => {
      const e = await use();
      await e.changeMembers('d1', { add: ['a', 'b'], remove: [], threshold: 10 });
      await e.changeMembers('d2', { add: ['a', 'c'], remove: [], threshold: 10 });
      await e.changeMembers('g', { add: ['a', 'b', 'c'], remove: [], threshold: 10 });
      await e.readPositions.raise([
        { conv: 'd1', uid: 'b', seq: 4 },
        { conv: 'd1', uid: 'a', seq: 9 },
        { conv: 'd2', uid: 'a', seq: 2 },
        { conv: 'g', uid: 'b', seq: 7 },
      ]);
      expect(await e.readPositions.peers('a', ['d1', 'd2', 'g', 'missing'])).toEqual(new Map([['d1', 4]]));
      expect(await e.readPositions.peers('b', ['d1'])).toEqual(new Map([['d1', 9]]));
      expect(await e.readPositions.peers('c', ['d2', 'g'])).toEqual(new Map([['d2', 2]]));
      expect(await e.readPositions.peers('a', [])).toEqual(new Map());
    });

    it('a read-diffused conversation lists no positions, only counts', async () => {
      const e = await use();
      await e.changeMembers('big', { add: ['a', 'b', 'c'], remove: [], threshold: 2 });
      await e.readPositions.raise([
        { conv: 'big', uid: 'a', seq: 3 },
        { conv: 'big', uid: 'b', seq: 1 },
      ]);
      const reads = (await e.readPositions.read(['big'], { upTo: 30, seqs: [1, 2] })).get('big');
      expect(reads).toMatchObject({ large: true, memberCount: 3, counts: [2, 1] });
      expect(reads?.positions.size).toBe(0);
    });

    it('sharing is on by default, per user, and can be turned off and on again', async () => {
      const e = await use();
      const rp = e.readPositions;
      expect(await rp.sharing(['a', 'b'])).toEqual([true, true]);
      await rp.setSharing('a', false);
      expect(await rp.sharing(['a', 'b'])).toEqual([false, true]);
      await rp.setSharing('a', false);
      expect(await rp.sharing(['a'])).toEqual([false]);
      await rp.setSharing('a', true);
      expect(await rp.sharing(['a', 'b'])).toEqual([true, true]);
    });

    it('mutedMentions is off by default; pull and userState read it with the stream, for a user the store has never seen too', async () => {
      const e = await use();
      await e.changeMembers('d', { add: ['a', 'b'], remove: [], threshold: 10 });
      const read = async (uid: string): Promise<[boolean | undefined, boolean | undefined, boolean]> => [
        (await e.userState(uid)).mutedMentions,
        (await e.pull(uid, null, 10)).mutedMentions,
        await e.readPositions.mutedMentions(uid),
      ];
      expect(await read('a')).toEqual([false, false, false]);
      expect(await read('z')).toEqual([false, false, false]);
      await e.readPositions.setMutedMentions('a', true);
      await e.readPositions.setMutedMentions('z', true);
      expect(await read('a')).toEqual([true, true, true]);
      expect(await read('b')).toEqual([false, false, false]);
      expect(await read('z')).toEqual([true, true, true]);
      await e.readPositions.setMutedMentions('a', false);
      expect(await read('a')).toEqual([false, false, false]);
    });

    it("an announcement reaches the processes following its user, not others'", async () => {
      const e = await use();
      const heard: ReadsChange[] = [];
      e.notifications.setHandler({ userChanged: () => undefined, headChanged: () => undefined, readsChanged: (c) => heard.push(c) });
      await e.notifications.followUser('a');
      await e.notifications.followUser('z');
      await e.readPositions.announce([
        { uid: 'a', conv: 'd', members: 2, reads: { b: 4 } },
        { uid: 'b', conv: 'd', members: 2, reads: { a: 2 } },
        { uid: 'a', conv: 'g', members: 31, reads: {} },
      ]);
      await vi.waitFor(() => expect(heard).toHaveLength(2), WAIT);
      // Delivery went on: a later one for another followed user arrives, none for b.
      await e.readPositions.announce([{ uid: 'z', conv: 'd', members: 2, reads: {} }]);
      await vi.waitFor(() => expect(heard).toHaveLength(3), WAIT);
      expect(heard).toEqual([
        { uid: 'a', conv: 'd', members: 2, reads: { b: 4 } },
        { uid: 'a', conv: 'g', members: 31, reads: {} },
        { uid: 'z', conv: 'd', members: 2, reads: {} },
      ]);
    });
  });
}
