import { describe, expect, it } from 'vitest';
import type { Engine, UserOp } from '../../server/engine/engine.js';
import { mergeOps } from '../../server/engine/merge-ops.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { clientViews } from '../helpers/client-view.js';
import type { UseEngine } from './conformance.js';
import { convWith, del, expectTotalsConsistent, join, message, one, pageStates, plainTotals, read, recordOne } from './conformance-helpers.js';

/**
 * Issue 43 on every engine: notification levels (rules.ts contribution), the last activity `at`
 * (a max-register on the record) and @all in write-diffused conversations (merge-ops.ts).
 */
export function levelConformance(use: UseEngine): void {
  const totals = async (e: Engine, uid: string) => plainTotals((await e.userState(uid)).totals);
  const settings = (uid: string, conv: string, change: { muted?: boolean; level?: 'all' | 'mentions' | 'none' }): UserOp => ({
    type: 'settings',
    uid,
    conv,
    ...change,
  });
  const T0 = 1_760_000_000_000;
  const messageAt = (uid: string, conv: string, lastSeq: number, at: number, mentionSeqs: number[] = []): UserOp => ({
    type: 'message',
    uid,
    conv,
    lastSeq,
    readSeq: 0,
    mentionSeqs,
    at,
  });

  describe('notification levels, last activity, @all (issue 43)', () => {
    it('mentions only keeps the badge at the mentions', async () => {
      const e = await use();
      await e.applyUserOps([join('u', 'c', 0, 'group'), join('u', 'd', 0, 'group'), message('u', 'c', 5, 0, [2, 4]), message('u', 'd', 3)]);
      expect(await totals(e, 'u')).toEqual({ total: 8, mentions: 2, categories: { group: 8 } });
      const r = await one(e, settings('u', 'c', { level: 'mentions' }));
      expect(r).toMatchObject({ changed: true });
      // Listed with its unread, muted stays false: only the badge changes.
      expect(r.state).toEqual(convWith({ conv: 'c', lastSeq: 5, mentions: 2, category: 'group', level: 'mentions' }));
      expect(await totals(e, 'u')).toEqual({ total: 5, mentions: 2, categories: { group: 5 } });
      // A new plain message adds nothing to the badge; a mention adds one; a read spends them.
      await one(e, message('u', 'c', 6));
      expect(await totals(e, 'u')).toEqual({ total: 5, mentions: 2, categories: { group: 5 } });
      await one(e, message('u', 'c', 7, 0, [7]));
      expect(await totals(e, 'u')).toEqual({ total: 6, mentions: 3, categories: { group: 6 } });
      await one(e, read('u', 'c', 4));
      expect(await totals(e, 'u')).toEqual({ total: 4, mentions: 1, categories: { group: 4 } });
      expectTotalsConsistent(await e.userState('u'));
      // The same level again changes nothing; 'none' is muted; muted: false is 'all'.
      expect(await one(e, settings('u', 'c', { level: 'mentions' }))).toMatchObject({ changed: false });
      const none = await one(e, settings('u', 'c', { level: 'none' }));
      expect(none.state).toEqual(convWith({ conv: 'c', lastSeq: 7, readSeq: 4, mentions: 1, category: 'group', muted: true }));
      expect(await totals(e, 'u')).toEqual({ total: 3, mentions: 0, categories: { group: 3 } });
      expect(await one(e, settings('u', 'c', { muted: true }))).toMatchObject({ changed: false });
      await one(e, settings('u', 'c', { level: 'mentions' }));
      const all = await one(e, settings('u', 'c', { muted: false }));
      expect(all.state?.level).toBeUndefined();
      expect(all.state?.muted).toBe(false);
      expect(await totals(e, 'u')).toEqual({ total: 6, mentions: 1, categories: { group: 6 } });
      // The pulled stream and snapshot carry the level as the results do.
      const pulled = await e.pull('u', null, 100);
      expect(pulled.entries.filter((x) => x.conv === 'c').map((x) => x.state?.level ?? 'all')).toContain('mentions');
      expectTotalsConsistent(await e.userState('u'));
    });

    it("a thread's row starts at level mentions; 'all' and 'none' are stored apart from that default (rules.ts defaultLevel)", async () => {
      const e = await use();
      const t = 'c#r:7';
      await e.applyUserOps([join('u', t, 0, 'group'), message('u', t, 5, 0, [2, 4])]);
      // The default: listed with its unread, only its mentions in the totals.
      expect((await e.userState('u')).states[0]).toEqual(
        convWith({ conv: t, parent: 'c', thread: 7, lastSeq: 5, mentions: 2, category: 'group', level: 'mentions' }),
      );
      expect(await totals(e, 'u')).toEqual({ total: 2, mentions: 2, categories: { group: 2 } });
      expect(await one(e, settings('u', t, { level: 'mentions' }))).toMatchObject({ changed: false });
      const all = await one(e, settings('u', t, { level: 'all' }));
      expect(all).toMatchObject({ changed: true });
      expect(all.state?.level).toBeUndefined();
      expect(await totals(e, 'u')).toEqual({ total: 5, mentions: 2, categories: { group: 5 } });
      // 'all' stays 'all' through a message, and a rejoin keeps it.
      await one(e, message('u', t, 6));
      expect(await totals(e, 'u')).toEqual({ total: 6, mentions: 2, categories: { group: 6 } });
      await one(e, settings('u', t, { level: 'none' }));
      expect(await totals(e, 'u')).toEqual({ total: 0, mentions: 0, categories: {} });
      // Unmuting goes back to the row's default.
      const back = await one(e, settings('u', t, { muted: false }));
      expect(back.state?.level).toBe('mentions');
      expect(await totals(e, 'u')).toEqual({ total: 2, mentions: 2, categories: { group: 2 } });
      const pulled = await e.pull('u', null, 100);
      expect(pulled.entries.filter((x) => x.conv === t).map((x) => x.state?.level ?? 'all')).toEqual(['mentions', 'mentions', 'all', 'all', 'all', 'mentions']);
      expectTotalsConsistent(await e.userState('u'));
    });

    it('a rejoin keeps the level (as it keeps muted); a deleted conversation counts nothing at any level', async () => {
      const e = await use();
      const c = join('u', 'c', 0, 'group');
      await e.applyUserOps([c, message('u', 'c', 3, 0, [3]), settings('u', 'c', { level: 'mentions' })]);
      await one(e, del('u', 'c', 3));
      expect(await totals(e, 'u')).toEqual({ total: 0, mentions: 0, categories: {} });
      await one(e, message('u', 'c', 4, 0, [4]));
      expect(await totals(e, 'u')).toEqual({ total: 1, mentions: 1, categories: { group: 1 } });
      await one(e, join('u', 'c', 4, 'group', false, c));
      expect((await e.userState('u')).states[0]?.level).toBe('mentions');
      expectTotalsConsistent(await e.userState('u'));
    });

    it('the last activity is a max-register: an older `at` or none changes nothing, every view shows it', async () => {
      const e = await use({ snapshotEvery: 2, streamMaxLen: 4 });
      await one(e, join('u', 'c'));
      const first = await one(e, messageAt('u', 'c', 1, T0));
      expect(first.state).toEqual(convWith({ conv: 'c', lastSeq: 1, at: T0 }));
      // A later message without `at`: the seq moves, the activity stays.
      expect((await one(e, message('u', 'c', 2))).state).toEqual(convWith({ conv: 'c', lastSeq: 2, at: T0 }));
      // An older `at` (a reordered message) is ignored; a duplicate changes nothing.
      expect(await one(e, messageAt('u', 'c', 2, T0 - 5))).toMatchObject({ changed: false });
      // A newer `at` alone (no new seq) is a visible change.
      const later = await one(e, messageAt('u', 'c', 2, T0 + 60_000));
      expect(later).toMatchObject({ changed: true, state: { at: T0 + 60_000, lastSeq: 2 } });
      // With a read register extension too (readGen) the text still holds both.
      await one(e, { type: 'unread-from', uid: 'u', conv: 'c', seq: 1, gen: 1 });
      const state = (await e.userState('u')).states[0];
      expect(state).toEqual(convWith({ conv: 'c', lastSeq: 2, readSeq: 0, readGen: 1, at: T0 + 60_000 }));
      // The stream, and a snapshot (taken every 2 changes here), carry it.
      expect(pageStates(await e.pull('u', null, 100))).toEqual([state]);
      const entries = await e.pull('u', { epoch: later.epoch, version: later.version - 1 }, 100);
      expect(entries.entries.map((x) => x.state?.at)).toEqual([T0 + 60_000, T0 + 60_000]);
      expectTotalsConsistent(await e.userState('u'));
    });

    it('the same ops in any order give the same record, `at` and level included', async () => {
      const ops: UserOp[] = [
        messageAt('u', 'c', 3, T0 + 3, [2]),
        messageAt('u', 'c', 5, T0 + 1),
        message('u', 'c', 6),
        settings('u', 'c', { level: 'mentions' }),
        read('u', 'c', 1),
      ];
      const states = [];
      for (const order of [ops, [...ops].reverse(), [ops[2], ops[0], ops[4], ops[1], ops[3]] as UserOp[]]) {
        const e = await use();
        await one(e, join('u', 'c'));
        await e.applyUserOps([...order, ...order]);
        states.push((await e.userState('u')).states);
        expectTotalsConsistent(await e.userState('u'));
      }
      expect(states[1]).toEqual(states[0]);
      expect(states[2]).toEqual(states[0]);
      expect(states[0]?.[0]).toMatchObject({ lastSeq: 6, readSeq: 1, mentions: 1, at: T0 + 3, level: 'mentions' });
    });

    it('@all in a write-diffused conversation is a mention of every member but the sender, once', async () => {
      const e = await use();
      const members = ['a', 'b', 'c'];
      const step = await e.changeMembers('g', { add: members, remove: [], category: 'group', threshold: 10 });
      await e.applyUserOps(step.joins.map((tag) => ({ ...join(tag.uid, 'g', 0, 'group'), gen: step.info.gen, joinGen: tag.joinGen, joinHead: tag.joinHead })));
      const messages = [
        { conv: 'g', seq: 1, sender: 'a', mentionAll: true, mentions: ['b'], at: T0 },
        { conv: 'g', seq: 2, sender: 'b', at: T0 + 10 },
      ];
      const recorded = await recordOne(e, 'g', 2, ['a', 'b']);
      if (!recorded) throw new Error('no conversation');
      await e.applyUserOps(mergeOps(messages, new Map([['g', recorded]])));
      const stateOf = async (uid: string) => (await e.userState(uid)).states[0];
      expect(await stateOf('a')).toMatchObject({ lastSeq: 2, readSeq: 1, mentions: 0, at: T0 + 10 });
      expect(await stateOf('b')).toMatchObject({ lastSeq: 2, readSeq: 2, mentions: 0, at: T0 + 10 });
      expect(await stateOf('c')).toMatchObject({ lastSeq: 2, readSeq: 0, mentions: 1, at: T0 + 10 });
      expect(await totals(e, 'c')).toEqual({ total: 2, mentions: 1, categories: { group: 2 } });
      // A mentions-only member hears it.
      await one(e, settings('c', 'g', { level: 'mentions' }));
      expect(await totals(e, 'c')).toEqual({ total: 1, mentions: 1, categories: { group: 1 } });
      await one(e, read('c', 'g', 1));
      expect(await totals(e, 'c')).toEqual({ total: 0, mentions: 0, categories: {} });
    });

    it('@all in a large group counts for every member, once, and is cleared by a read', async () => {
      const e = await use();
      const sync = new SyncService(e, { largeGroupThreshold: 2 });
      await sync.changeMembers('big', { add: ['a', 'b', 'c', 'd'], remove: [], category: 'group' });
      const everyone = { conv: 'big', seq: 1, sender: 'a', mentionAll: true, mentions: ['b'], at: T0 };
      await sync.postMessages([everyone]);
      await sync.postMessages([{ conv: 'big', seq: 2, sender: 'c', at: T0 + 5 }]);
      // A redelivery, alone and in a batch with another conversation: nothing counts twice.
      await sync.changeMembers('small', { add: ['b'], remove: [] });
      await sync.postMessages([everyone, { conv: 'small', seq: 1, sender: 'b' }]);
      const row = async (uid: string) => (await sync.unread(uid)).conversations.find((c) => c.conv === 'big');
      // Every member but the sender: b once (named and @all), d; c read it by sending seq 2.
      expect(await row('a')).toMatchObject({ unread: 1, mentions: 0, at: T0 + 5 });
      expect(await row('b')).toMatchObject({ unread: 2, mentions: 1, at: T0 + 5 });
      expect(await row('c')).toMatchObject({ unread: 0, mentions: 0, at: T0 + 5 });
      expect(await row('d')).toMatchObject({ unread: 2, mentions: 1, at: T0 + 5 });
      expect(await sync.unread('d')).toMatchObject({ total: 2, mentions: 1 });
      // A client sees the same from what it pulls (the states, heads, headAt and mentionAll).
      const pulled = await sync.pull('d', null);
      expect(pulled).toMatchObject({ headAt: { big: T0 + 5 }, mentionAll: { big: [1] } });
      const held = pageStates(pulled);
      expect(clientViews(held, pulled.heads, pulled)).toEqual((await sync.unread('d')).conversations);
      // Mentions only: the @all mention is the badge.
      await sync.updateSettings('d', 'big', { level: 'mentions' });
      expect(await sync.unread('d')).toMatchObject({ total: 1, mentions: 1 });
      // A read past it clears it; unread from before it counts it again.
      await sync.read('d', 'big', 1);
      expect(await sync.unread('d')).toMatchObject({ total: 0, mentions: 0 });
      await e.applyUserOps([{ type: 'unread-from', uid: 'd', conv: 'big', seq: 1 }]);
      expect(await sync.unread('d')).toMatchObject({ total: 1, mentions: 1 });
      // A member who joins later never counts an @all from before the join.
      await sync.changeMembers('big', { add: ['late'], remove: [] });
      expect(await row('late')).toMatchObject({ unread: 0, mentions: 0 });
    });

    it("the last activity is the conversation's: a joiner, and every mode switch, keep it", async () => {
      const e = await use();
      const sync = new SyncService(e, { largeGroupThreshold: 2 });
      const atOf = async (uid: string) => (await sync.unread(uid)).conversations.find((c) => c.conv === 'g')?.at;
      await sync.changeMembers('g', { add: ['a', 'b'], remove: [] });
      await sync.postMessages([{ conv: 'g', seq: 1, sender: 'a', at: T0 }]);
      // A message without a time, or an older one, changes nothing.
      await sync.postMessages([{ conv: 'g', seq: 2, sender: 'a' }]);
      await sync.postMessages([{ conv: 'g', seq: 3, sender: 'b', at: T0 - 1 }]);
      await sync.changeMembers('g', { add: ['c'], remove: [] });
      // Read diffusion now (3 > 2): the joiner's record got it from its membership op.
      expect(await atOf('c')).toBe(T0);
      await sync.postMessages([{ conv: 'g', seq: 4, sender: 'c', at: T0 + 5 }]);
      await sync.changeMembers('g', { add: ['d'], remove: [] });
      for (const uid of ['a', 'b', 'c', 'd']) expect(await atOf(uid), uid).toBe(T0 + 5);
      // Back to write diffusion: the rewritten records carry it, without headAt.
      await sync.changeMembers('g', { add: [], remove: ['c', 'd'] });
      const pulled = await sync.pull('a', null);
      expect(pulled.headAt).toBeUndefined();
      expect(pageStates(pulled).find((s) => s.conv === 'g')).toMatchObject({ large: false, at: T0 + 5 });
      expect(await atOf('b')).toBe(T0 + 5);
    });
  });
}
