import { describe, expect, it } from 'vitest';
import type { UseEngine } from './conformance.js';
import { recordOne, sorted } from './conformance-helpers.js';

const T = 500;

/** The conversation steps of the Engine contract: membership, the threshold decision, heads. */
export function conversationConformance(use: UseEngine): void {
  describe('conversations', () => {
    it('an unknown conversation: recordMessages gives null and nothing is created', async () => {
      const e = await use();
      expect(await recordOne(e, 'nope', 5, ['a'])).toBeNull();
      expect(await e.getConversation('nope')).toBeNull();
      expect(await e.roster('nope')).toBeNull();
      expect(await e.heads(['nope'])).toEqual(new Map());
      expect(await e.missingConversations(['nope'])).toEqual(['nope']);
    });

    it('changeMembers creates the conversation; a given category replaces the stored one', async () => {
      const e = await use();
      const created = await e.changeMembers('c1', { add: [], remove: [], threshold: T });
      expect(created).toMatchObject({
        info: { conv: 'c1', maxSeq: 0, large: false, category: 'default', memberCount: 0 },
        joins: [],
        leaves: [],
        rewrite: false,
      });
      expect(created.info.gen).toBeGreaterThan(0);
      expect((await e.changeMembers('c1', { add: [], remove: [], category: 'group', threshold: T })).info.category).toBe('group');
      expect((await e.changeMembers('c1', { add: [], remove: [], threshold: T })).info.category).toBe('group');
      expect(await e.getConversation('c1')).toMatchObject({ conv: 'c1', maxSeq: 0, large: false, category: 'group', memberCount: 0 });
      expect(await e.missingConversations(['c1', 'c2'])).toEqual(['c2']);
      const fresh = await e.changeMembers('c3', { add: [], remove: [], category: 'system', threshold: T });
      expect(fresh).toMatchObject({ info: { category: 'system' }, rewrite: false });
      // All known (one EXISTS answers it on Redis), and repeats answered per position.
      expect(await e.missingConversations(['c1', 'c3', 'c1'])).toEqual([]);
      expect(await e.missingConversations(['c2', 'c1', 'c4', 'c2'])).toEqual(['c2', 'c4', 'c2']);
    });

    it('a join is tagged with the generation and head of the change; a repeat reports the same tag', async () => {
      const e = await use();
      const first = await e.changeMembers('c', { add: ['a', 'b'], remove: [], threshold: T });
      expect(first.joins).toEqual([
        { uid: 'a', joinGen: first.info.gen, joinHead: 0 },
        { uid: 'b', joinGen: first.info.gen, joinHead: 0 },
      ]);
      await recordOne(e, 'c', 7, []);
      const second = await e.changeMembers('c', { add: ['b', 'c'], remove: ['x'], threshold: T });
      expect(second.info.gen).toBeGreaterThan(first.info.gen);
      expect(second.joins).toEqual([
        { uid: 'b', joinGen: first.info.gen, joinHead: 0 },
        { uid: 'c', joinGen: second.info.gen, joinHead: 7 },
      ]);
      expect(second.leaves).toEqual(['x']);
      expect(second.fromGen).toBe(first.info.gen);
      // Nothing changes: the generation stays, and the retry reports the same joins and leaves.
      const retry = await e.changeMembers('c', { add: ['b', 'c'], remove: ['x'], threshold: T });
      expect(retry).toEqual({ ...second, info: { ...second.info }, fromGen: second.info.gen });
      const roster = await e.roster('c');
      expect(sorted(roster?.members ?? [], (m) => m.uid)).toEqual([
        { uid: 'a', joinGen: first.info.gen, joinHead: 0 },
        { uid: 'b', joinGen: first.info.gen, joinHead: 0 },
        { uid: 'c', joinGen: second.info.gen, joinHead: 7 },
      ]);
      expect(roster?.info).toEqual(second.info);
    });

    it('recordMessages max-merges maxSeq and lists every member when write-diffused', async () => {
      const e = await use();
      await e.changeMembers('c1', { add: ['a', 'b', 'c'], remove: [], threshold: T });
      const after = await e.changeMembers('c1', { add: ['d'], remove: ['c'], threshold: T });
      expect(after.info.memberCount).toBe(3);
      const first = await recordOne(e, 'c1', 5, []);
      expect(first?.info.maxSeq).toBe(5);
      expect(sorted(first?.members ?? [])).toEqual(['a', 'b', 'd']);
      expect((await recordOne(e, 'c1', 3, []))?.info.maxSeq).toBe(5);
      const big = 2 ** 48 - 1;
      expect((await recordOne(e, 'c1', big, []))?.info.maxSeq).toBe(big);
      await e.changeMembers('c2', { add: [], remove: [], threshold: T });
      expect(await e.heads(['c1', 'c2', 'nope'])).toEqual(
        new Map([
          ['c1', big],
          ['c2', 0],
        ]),
      );
    });

    it('the threshold decision is made in the step; a switch asks for a rewrite until it is finished', async () => {
      const e = await use();
      const small = await e.changeMembers('g', { add: ['a', 'b'], remove: [], threshold: 2 });
      expect(small).toMatchObject({ info: { large: false }, rewrite: false });
      const big = await e.changeMembers('g', { add: ['c'], remove: [], threshold: 2 });
      expect(big).toMatchObject({ info: { large: true, memberCount: 3 }, rewrite: true });
      // A read-diffused conversation lists only the candidates who are members.
      const rec = await recordOne(e, 'g', 4, ['a', 'zed', 'c']);
      expect(rec).toMatchObject({ info: { large: true, maxSeq: 4 }, members: ['a', 'c'] });
      // Not finished: a retry (or any change) reports the rewrite again.
      expect((await e.changeMembers('g', { add: ['c'], remove: [], threshold: 2 })).rewrite).toBe(true);
      const roster = await e.roster('g');
      await e.finishRewrite('g', roster?.info.gen ?? 0);
      expect((await e.changeMembers('g', { add: [], remove: [], threshold: 2 })).rewrite).toBe(false);
      // A newer switch keeps its own marker against the finish of an older rewrite.
      const back = await e.changeMembers('g', { add: [], remove: ['c'], threshold: 2 });
      expect(back).toMatchObject({ info: { large: false }, rewrite: true });
      await e.finishRewrite('g', big.info.gen);
      expect((await e.changeMembers('g', { add: [], remove: [], threshold: 2 })).rewrite).toBe(true);
      await e.finishRewrite('g', back.info.gen);
      expect((await e.changeMembers('g', { add: [], remove: [], threshold: 2 })).rewrite).toBe(false);
      // A category change is a rewrite too.
      expect((await e.changeMembers('g', { add: [], remove: [], category: 'team', threshold: 2 })).rewrite).toBe(true);
    });

    it('changeMembers takes thousands of members at once', async () => {
      const e = await use();
      const uids = Array.from({ length: 10_000 }, (_, i) => `m${i}`);
      expect((await e.changeMembers('big', { add: uids, remove: [], threshold: 1_000_000 })).info.memberCount).toBe(10_000);
      const step = await e.changeMembers('big', { add: ['extra'], remove: uids.slice(0, 9_000), threshold: 1_000_000 });
      expect(step.info.memberCount).toBe(1_001);
      expect(step.leaves).toHaveLength(9_000);
      expect((await recordOne(e, 'big', 1, []))?.members).toHaveLength(1_001);
      expect((await e.roster('big'))?.members).toHaveLength(1_001);
    });

    it('recordMessages takes many conversations at once, unknown ones in between, each its own step', async () => {
      const e = await use();
      await e.changeMembers('w', { add: ['a', 'b'], remove: [], threshold: 2 });
      await e.changeMembers('r', { add: ['a', 'b', 'c'], remove: [], threshold: 2 });
      const got = await e.recordMessages([
        { conv: 'w', seq: 3, candidates: ['a'] },
        { conv: 'nope', seq: 1, candidates: ['a'] },
        { conv: 'r', seq: 9, candidates: ['c', 'zed', 'a'] },
        { conv: 'w', seq: 2, candidates: [] },
      ]);
      expect(got.map((r) => r && [r.info.conv, r.info.maxSeq, r.info.large, sorted(r.members)])).toEqual([
        ['w', 3, false, ['a', 'b']],
        null,
        ['r', 9, true, ['a', 'c']],
        ['w', 3, false, ['a', 'b']],
      ]);
      expect(await e.getConversation('nope')).toBeNull();
      expect(await e.recordMessages([])).toEqual([]);
    });

    it('ids named like Object.prototype members are members like any other', async () => {
      const e = await use();
      const names = ['__proto__', 'constructor', 'toString'];
      await e.changeMembers('toString', { add: names, remove: [], category: 'constructor', threshold: T });
      expect(sorted((await recordOne(e, 'toString', 1, []))?.members ?? [])).toEqual(sorted(names));
      expect(await e.heads(['toString', '__proto__'])).toEqual(new Map([['toString', 1]]));
    });
  });
}
