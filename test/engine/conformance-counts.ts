import { describe, expect, it } from 'vitest';
import type { UserOp } from '../../server/engine/engine.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { clientViews } from '../helpers/client-view.js';
import type { UseEngine } from './conformance.js';
import { expectTotalsConsistent, join, one, pageStates, read } from './conformance-helpers.js';

/**
 * Issue 43, "what counts", on every engine: a `counts: false` message raises lastSeq and the last
 * activity but no unread and no mention; a recall makes a seq not count from then on (rules.ts
 * nocountSeqs), exact under duplicates, reorders and a recall landing before its message.
 */
export function countsConformance(use: UseEngine): void {
  const T0 = 1_760_000_000_000;
  const sync = async () => new SyncService(await use(), { largeGroupThreshold: 100 });
  const row = async (s: SyncService, uid: string, conv: string) => (await s.unread(uid)).conversations.find((c) => c.conv === conv);

  describe('what counts: non-counting messages and recalls (issue 43)', () => {
    it('a reaction (non-counting) raises activity but not the badge', async () => {
      const s = await sync();
      await s.changeMembers('g', { add: ['a', 'b'], remove: [], category: 'group' });
      await s.postMessages([{ conv: 'g', seq: 1, sender: 'a', at: T0 }]);
      await s.postMessages([{ conv: 'g', seq: 2, sender: 'a', at: T0 + 9, counts: false, mentions: ['b'], mentionAll: true }]);
      expect(await row(s, 'b', 'g')).toMatchObject({ lastSeq: 2, unread: 1, mentions: 0, at: T0 + 9 });
      expect(await s.unread('b')).toMatchObject({ total: 1, mentions: 0 });
      // The client derives the same from the pulled states.
      const pulled = await s.pull('b', null);
      expect(pageStates(pulled).find((x) => x.conv === 'g')).toMatchObject({ lastSeq: 2, nocount: 1 });
      expect(clientViews(pageStates(pulled), pulled.heads, pulled)).toEqual((await s.unread('b')).conversations);
      // A later counting message counts; a read past all clears it.
      await s.postMessages([{ conv: 'g', seq: 3, sender: 'a' }]);
      expect(await s.unread('b')).toMatchObject({ total: 2 });
      await s.read('b', 'g', 3);
      expect(await s.unread('b')).toMatchObject({ total: 0 });
      expectTotalsConsistent(await s.engine.userState('b'));
    });

    it('a recalled unread message drops the count and its mention on every device', async () => {
      const s = await sync();
      await s.changeMembers('g', { add: ['a', 'b', 'c'], remove: [], category: 'group' });
      await s.postMessages([
        { conv: 'g', seq: 1, sender: 'a' },
        { conv: 'g', seq: 2, sender: 'a', mentions: ['b', 'c'] },
        { conv: 'g', seq: 3, sender: 'a' },
      ]);
      await s.read('c', 'g', 2);
      expect(await s.unread('b')).toMatchObject({ total: 3, mentions: 1 });
      const before = await s.pull('b', null);
      // a recalls seq 2 with a notice that does not count (seq 4); redelivered, nothing changes.
      const recall = { conv: 'g', seq: 4, sender: 'a', counts: false, recalls: [2] };
      await s.postMessages([recall]);
      await s.postMessages([recall]);
      expect(await row(s, 'b', 'g')).toMatchObject({ lastSeq: 4, unread: 2, mentions: 0 });
      expect(await s.unread('b')).toMatchObject({ total: 2, mentions: 0 });
      // c had read it: only seq 3 is unread, as before.
      expect(await s.unread('c')).toMatchObject({ total: 1, mentions: 0 });
      // Another device catching up from its cursor sees the same.
      const after = await s.pull('b', { epoch: before.epoch, version: before.version });
      const latest = after.entries.filter((x) => x.conv === 'g').at(-1);
      expect(latest?.state).toMatchObject({ lastSeq: 4, readSeq: 0, mentions: 0, nocount: 2 });
      expect(clientViews(pageStates(await s.pull('b', null)), {})).toEqual((await s.unread('b')).conversations);
      // "Unread from here" below the recall keeps it recalled, its mention too.
      await s.read('b', 'g', 4);
      await s.engine.applyUserOps([{ type: 'unread-from', uid: 'b', conv: 'g', seq: 1 }]);
      expect(await s.unread('b')).toMatchObject({ total: 2, mentions: 0 });
      expectTotalsConsistent(await s.engine.userState('b'));
    });

    it('a recall before its message', async () => {
      const s = await sync();
      await s.changeMembers('g', { add: ['a', 'b'], remove: [], category: 'group' });
      await s.postMessages([{ conv: 'g', seq: 2, sender: 'a', counts: false, recalls: [1] }]);
      expect(await s.unread('b')).toMatchObject({ total: 0, mentions: 0 });
      await s.postMessages([{ conv: 'g', seq: 1, sender: 'a', mentions: ['b'] }]);
      await s.postMessages([{ conv: 'g', seq: 1, sender: 'a', mentions: ['b'] }]);
      expect(await row(s, 'b', 'g')).toMatchObject({ lastSeq: 2, unread: 0, mentions: 0 });
      await s.postMessages([{ conv: 'g', seq: 3, sender: 'a' }]);
      expect(await s.unread('b')).toMatchObject({ total: 1, mentions: 0 });
      expectTotalsConsistent(await s.engine.userState('b'));
    });

    it('the same non-counting ops in any order, duplicated, give the same record', async () => {
      const m = (lastSeq: number, mentionSeqs: number[], nocountSeqs?: number[]): UserOp => ({
        type: 'message',
        uid: 'u',
        conv: 'c',
        lastSeq,
        readSeq: 0,
        mentionSeqs,
        ...(nocountSeqs ? { nocountSeqs } : {}),
      });
      const ops: UserOp[] = [m(2, [2]), m(3, [], [3]), m(5, [], [2, 7]), m(4, [4]), read('u', 'c', 1), m(7, [7])];
      const states = [];
      for (const order of [ops, [...ops].reverse(), [ops[3], ops[5], ops[0], ops[2], ops[4], ops[1]] as UserOp[]]) {
        const e = await use();
        await one(e, join('u', 'c'));
        await e.applyUserOps([...order, ...order]);
        const state = await e.userState('u');
        states.push(state.states);
        expectTotalsConsistent(state);
      }
      expect(states[1]).toEqual(states[0]);
      expect(states[2]).toEqual(states[0]);
      // 7 − 1 = 6 minus 2, 3, 7 (all above readSeq 1): 3 unread, mention 4 only.
      expect(states[0]?.[0]).toMatchObject({ lastSeq: 7, readSeq: 1, mentions: 1, nocount: 3 });
    });
  });
}
