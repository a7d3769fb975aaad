import { describe, expect, it } from 'vitest';
import { topicConv } from '../../protocol/child-id.js';
import type { UseEngine } from './conformance.js';

/** Topics' store side (PROTOCOL.md "Topics"): the capped registry, a sync's newest-roster-wins (MembersChange.sync), and a delta sync's guard (MembersChange.syncFrom). */
export function topicsConformance(use: UseEngine): void {
  describe('topics', () => {
    it('the registry: added once, capped atomically, marked ready; unknown conversations refused', async () => {
      const e = await use();
      expect(await e.addTopic('g', 't1', 2)).toBe('unknown');
      expect(await e.topics('g')).toEqual([]);
      await e.changeMembers('g', { add: ['a'], remove: [], threshold: 10 });
      expect(await e.topics('g')).toEqual([]);
      expect(await e.addTopic('g', 't1', 2)).toBe('added');
      expect(await e.addTopic('g', 't1', 2)).toBe('present');
      await e.topicReady('g', 't1');
      expect(await e.addTopic('g', 't1', 2)).toBe('ready');
      // Racing adds at the cap: exactly one gets in.
      const raced = await Promise.all([e.addTopic('g', 't2', 2), e.addTopic('g', 't3', 2)]);
      expect([...raced].sort()).toEqual(['added', 'full']);
      expect((await e.topics('g')).sort()).toEqual(['t1', raced[0] === 'added' ? 't2' : 't3'].sort());
      // A registered topic stays addable at the cap; a mark of an unregistered one registers nothing.
      expect(await e.addTopic('g', 't1', 2)).toBe('ready');
      await e.topicReady('g', 't9');
      expect((await e.topics('g')).length).toBe(2);
    });

    it('a sync sets the members to the roster; an older sync changes nothing and reports only its removals that hold', async () => {
      const e = await use();
      const child = topicConv('g', 't');
      const first = await e.changeMembers(child, { add: ['a', 'b'], remove: [], threshold: 10, sync: 5 });
      expect(first.joins.map((j) => j.uid).sort()).toEqual(['a', 'b']);
      const newer = await e.changeMembers(child, { add: ['a', 'c'], remove: ['x'], category: 'team', threshold: 10, sync: 7 });
      expect(newer.joins.map((j) => j.uid).sort()).toEqual(['a', 'c']);
      expect(newer.leaves.sort()).toEqual(['b', 'x']);
      expect(newer.info).toMatchObject({ memberCount: 2, category: 'team' });
      const stale = await e.changeMembers(child, { add: ['a', 'b'], remove: ['c', 'x'], category: 'old', threshold: 10, sync: 6 });
      expect(stale.joins).toEqual([]);
      expect(stale.leaves).toEqual(['x']);
      expect(stale.info).toMatchObject({ memberCount: 2, category: 'team', gen: newer.info.gen });
      // A repeat of the newest sync reports the same joins again (a retry's user steps land).
      const repeat = await e.changeMembers(child, { add: ['a', 'c'], remove: ['x'], category: 'team', threshold: 10, sync: 7 });
      expect(repeat.joins).toEqual(newer.joins);
      expect(repeat.info.gen).toBe(newer.info.gen);
      expect((await e.roster(child))?.members.map((m) => m.uid).sort()).toEqual(['a', 'c']);
    });

    it('a delta sync applies where the child holds the roster it was made from, or the result (a repeat); a child behind changes nothing and says so; a newer one is stale', async () => {
      const e = await use();
      const child = topicConv('g', 'd');
      const whole = await e.changeMembers(child, { add: ['a', 'b'], remove: [], threshold: 10, sync: 5 });
      // The parent's change from its roster at 5 to the one at 7: c joins, b leaves.
      const delta = await e.changeMembers(child, { add: ['c'], remove: ['b'], threshold: 10, sync: 7, syncFrom: 5 });
      expect(delta.behind).toBeUndefined();
      expect(delta.fromGen).toBe(whole.info.gen);
      expect(delta.joins.map((j) => j.uid)).toEqual(['c']);
      expect(delta.leaves).toEqual(['b']);
      expect((await e.roster(child))?.members.map((m) => m.uid).sort()).toEqual(['a', 'c']);
      // A repeat (a retry) reports the same joins and leaves and changes nothing.
      const repeat = await e.changeMembers(child, { add: ['c'], remove: ['b'], threshold: 10, sync: 7, syncFrom: 5 });
      expect(repeat).toMatchObject({ joins: delta.joins, leaves: ['b'], fromGen: delta.info.gen, info: { gen: delta.info.gen } });
      expect(repeat.behind).toBeUndefined();
      // A delta from 8 while the child holds 7: an earlier change's sync is missing.
      const behind = await e.changeMembers(child, { add: ['z'], remove: ['a'], threshold: 10, sync: 9, syncFrom: 8 });
      expect(behind).toMatchObject({ behind: true, joins: [], leaves: [], info: { gen: delta.info.gen } });
      // A late delta from 5 to 6 while the child holds 7: stale, only its removals that hold reported.
      const stale = await e.changeMembers(child, { add: ['b'], remove: ['x'], threshold: 10, sync: 6, syncFrom: 5 });
      expect(stale).toMatchObject({ joins: [], leaves: ['x'], info: { gen: delta.info.gen } });
      expect(stale.behind).toBeUndefined();
      expect((await e.roster(child))?.members.map((m) => m.uid).sort()).toEqual(['a', 'c']);
      // A child that does not exist is behind, and is not created.
      expect(await e.changeMembers(topicConv('g', 'none'), { add: ['a'], remove: [], threshold: 10, sync: 3, syncFrom: 2 })).toMatchObject({
        behind: true,
        joins: [],
      });
      expect(await e.getConversation(topicConv('g', 'none'))).toBeNull();
    });
  });
}
