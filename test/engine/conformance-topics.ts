import { describe, expect, it } from 'vitest';
import { topicConv } from '../../protocol/child-id.js';
import type { UseEngine } from './conformance.js';

/** Topics' store side (PROTOCOL.md "Topics"): the capped registry, and a sync's newest-roster-wins (MembersChange.sync). */
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
  });
}
