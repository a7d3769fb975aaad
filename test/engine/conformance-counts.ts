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

    // Found by the HTTP property test once the model had recalls: a write-diffused recall before
    // its message reached only the members of the time, and one who joined before the message
    // arrived counted it.
    it('a member who joins between a recall and its message does not count it', async () => {
      const s = await sync();
      await s.changeMembers('g', { add: ['a', 'b'], remove: [], category: 'group' });
      await s.postMessages([{ conv: 'g', seq: 1, sender: 'a' }]);
      await s.postMessages([{ conv: 'g', seq: 2, sender: 'a', counts: false, recalls: [3] }]);
      await s.changeMembers('g', { add: ['c'], remove: [] });
      await s.postMessages([{ conv: 'g', seq: 3, sender: 'a', mentions: ['c'] }]);
      expect(await row(s, 'c', 'g')).toMatchObject({ lastSeq: 3, unread: 0, mentions: 0 });
      expect(await row(s, 'b', 'g')).toMatchObject({ lastSeq: 3, unread: 1, mentions: 0 });
      await s.postMessages([{ conv: 'g', seq: 4, sender: 'a' }]);
      expect(await s.unread('c')).toMatchObject({ total: 1, mentions: 0 });
      expectTotalsConsistent(await s.engine.userState('c'));
    });

    // Read-diffused (large) groups: the conversation keeps the set, each reader's unread leaves out
    // those in (readSeq, head] at read time (PROTOCOL.md "What counts").
    const large = async () => {
      const s = new SyncService(await use(), { largeGroupThreshold: 2 });
      await s.changeMembers('L', { add: ['a', 'b', 'c'], remove: [], category: 'group' });
      return s;
    };
    /** The client's derivation from a pull from scratch equals the server's /unread. */
    const sameOnClient = async (s: SyncService, uid: string) => {
      const pulled = await s.pull(uid, null);
      expect(clientViews(pageStates(pulled), pulled.heads, pulled)).toEqual((await s.unread(uid)).conversations);
    };

    it('large group: a counts:false message adds nothing, its mention and @all are ignored', async () => {
      const s = await large();
      expect((await s.engine.getConversation('L'))?.large).toBe(true);
      await s.postMessages([{ conv: 'L', seq: 1, sender: 'a' }]);
      await s.postMessages([{ conv: 'L', seq: 2, sender: 'a', counts: false, mentions: ['b'], mentionAll: true }]);
      expect(await row(s, 'b', 'L')).toMatchObject({ lastSeq: 2, unread: 1, mentions: 0 });
      expect(await s.unread('c')).toMatchObject({ total: 1, mentions: 0 });
      await sameOnClient(s, 'b');
      await s.postMessages([{ conv: 'L', seq: 3, sender: 'a' }]);
      expect(await s.unread('b')).toMatchObject({ total: 2 });
      await s.read('b', 'L', 2);
      expect(await s.unread('b')).toMatchObject({ total: 1 });
      await sameOnClient(s, 'b');
    });

    it('large group: a recall after its message drops the count for every member and the mention for the mentioned one', async () => {
      const s = await large();
      await s.postMessages([
        { conv: 'L', seq: 1, sender: 'a' },
        { conv: 'L', seq: 2, sender: 'a', mentions: ['b'] },
        { conv: 'L', seq: 3, sender: 'a', mentionAll: true },
        { conv: 'L', seq: 4, sender: 'a' },
      ]);
      expect(await s.unread('b')).toMatchObject({ total: 4, mentions: 2 });
      expect(await s.unread('c')).toMatchObject({ total: 4, mentions: 1 });
      const before = await s.pull('b', null);
      const recall = { conv: 'L', seq: 5, sender: 'a', counts: false, recalls: [2, 3] };
      await s.postMessages([recall]);
      await s.postMessages([recall]);
      expect(await row(s, 'b', 'L')).toMatchObject({ lastSeq: 5, unread: 2, mentions: 0 });
      expect(await s.unread('c')).toMatchObject({ total: 2, mentions: 0 });
      // The sender's own view: all read.
      expect(await s.unread('a')).toMatchObject({ total: 0, mentions: 0 });
      await sameOnClient(s, 'b');
      await sameOnClient(s, 'c');
      // A device catching up from its cursor derives the same.
      const after = await s.pull('b', { epoch: before.epoch, version: before.version });
      const states = new Map(pageStates(before).map((x) => [x.conv, x]));
      for (const e of after.entries) if (e.state) states.set(e.conv, e.state);
      expect(clientViews(states.values(), after.heads, after)).toEqual((await s.unread('b')).conversations);
      // A read past 2 and an "unread from here" below it: still recalled, the mention too.
      await s.read('b', 'L', 3);
      await s.engine.applyUserOps([{ type: 'unread-from', uid: 'b', conv: 'L', seq: 1 }]);
      expect(await row(s, 'b', 'L')).toMatchObject({ readSeq: 0, unread: 2, mentions: 0 });
      await sameOnClient(s, 'b');
    });

    it('large group: a recall before its message, duplicated, counts once as nothing', async () => {
      const s = await large();
      await s.postMessages([{ conv: 'L', seq: 3, sender: 'a', counts: false, recalls: [1, 2] }]);
      await s.postMessages([{ conv: 'L', seq: 3, sender: 'a', counts: false, recalls: [1, 2] }]);
      expect(await s.unread('b')).toMatchObject({ total: 0, mentions: 0 });
      await s.postMessages([{ conv: 'L', seq: 2, sender: 'a', mentionAll: true }]);
      await s.postMessages([{ conv: 'L', seq: 1, sender: 'c', mentions: ['b'] }]);
      await s.postMessages([{ conv: 'L', seq: 1, sender: 'c', mentions: ['b'] }]);
      expect(await row(s, 'b', 'L')).toMatchObject({ lastSeq: 3, unread: 0, mentions: 0 });
      await s.postMessages([{ conv: 'L', seq: 4, sender: 'a' }]);
      expect(await s.unread('b')).toMatchObject({ total: 1, mentions: 0 });
      expect(await s.unread('c')).toMatchObject({ total: 1, mentions: 0 });
      await sameOnClient(s, 'b');
    });

    // Found by the HTTP property test (seed 1831615044): the recall came in one batch with a
    // redelivery of the message it recalls; the redelivered mention was left out but the one the
    // member's record held from the first delivery stayed.
    it('large group: a recall batched with a redelivery of its message drops the held mention', async () => {
      const s = await large();
      await s.postMessages([{ conv: 'L', seq: 1, sender: 'a', mentions: ['b'] }]);
      expect(await s.unread('b')).toMatchObject({ total: 1, mentions: 1 });
      await s.postMessages([
        { conv: 'L', seq: 2, sender: 'c', mentionAll: true, recalls: [1] },
        { conv: 'L', seq: 1, sender: 'a', mentions: ['b'] },
      ]);
      expect(await row(s, 'b', 'L')).toMatchObject({ lastSeq: 2, unread: 1, mentions: 1 });
      await sameOnClient(s, 'b');
    });

    it('switching to read diffusion and back keeps the non-counting seqs exact', async () => {
      const s = new SyncService(await use(), { largeGroupThreshold: 3 });
      await s.changeMembers('G', { add: ['a', 'b', 'c'], remove: [], category: 'group' });
      // Write-diffused: 2 does not count, 3 (b's mention) is recalled.
      await s.postMessages([
        { conv: 'G', seq: 1, sender: 'a' },
        { conv: 'G', seq: 2, sender: 'a', counts: false },
        { conv: 'G', seq: 3, sender: 'a', mentions: ['b'] },
        { conv: 'G', seq: 4, sender: 'a', counts: false, recalls: [3] },
      ]);
      expect(await s.unread('b')).toMatchObject({ total: 1, mentions: 0 });
      await s.changeMembers('G', { add: ['d'], remove: [] });
      expect((await s.engine.getConversation('G'))?.large).toBe(true);
      expect(await s.unread('b')).toMatchObject({ total: 1, mentions: 0 });
      // Read-diffused: 5 counts, 6 is recalled by 7, 3 is recalled again (a duplicate), 8 counts.
      await s.postMessages([
        { conv: 'G', seq: 5, sender: 'a' },
        { conv: 'G', seq: 6, sender: 'a', mentions: ['c'] },
        { conv: 'G', seq: 7, sender: 'a', counts: false, recalls: [6, 3] },
        { conv: 'G', seq: 8, sender: 'a' },
      ]);
      expect(await s.unread('b')).toMatchObject({ total: 3, mentions: 0 });
      expect(await s.unread('c')).toMatchObject({ total: 3, mentions: 0 });
      expect(await s.unread('d')).toMatchObject({ total: 2, mentions: 0 });
      await sameOnClient(s, 'b');
      // Back to write diffusion: every member's record takes the seqs recalled meanwhile.
      await s.changeMembers('G', { add: [], remove: ['d'] });
      expect((await s.engine.getConversation('G'))?.large).toBe(false);
      expect(await s.unread('b')).toMatchObject({ total: 3, mentions: 0 });
      expect(await s.unread('c')).toMatchObject({ total: 3, mentions: 0 });
      await s.postMessages([{ conv: 'G', seq: 9, sender: 'a', counts: false, recalls: [5] }]);
      expect(await s.unread('b')).toMatchObject({ total: 2, mentions: 0 });
      for (const uid of ['b', 'c']) {
        expectTotalsConsistent(await s.engine.userState(uid));
        await sameOnClient(s, uid);
      }
      // And read-diffused again: still exact.
      await s.changeMembers('G', { add: ['e'], remove: [] });
      expect(await s.unread('b')).toMatchObject({ total: 2, mentions: 0 });
      await sameOnClient(s, 'b');
    });

    // The index of mentions holds only those made while read-diffused, the newest 1000 pairs: a
    // recall of a seq it cannot vouch for drops that seq's mention from every member's state.
    it('large group: a mention made while write-diffused and recalled after the switch is dropped', async () => {
      const s = new SyncService(await use(), { largeGroupThreshold: 3 });
      await s.changeMembers('G', { add: ['a', 'b', 'c'], remove: [], category: 'group' });
      await s.postMessages([
        { conv: 'G', seq: 1, sender: 'a', mentions: ['b'] },
        { conv: 'G', seq: 2, sender: 'a', mentionAll: true },
        { conv: 'G', seq: 3, sender: 'a' },
      ]);
      expect(await s.unread('b')).toMatchObject({ total: 3, mentions: 2 });
      // c has read them: spent mentions, which an "unread from here" would count again.
      await s.read('c', 'G', 3);
      await s.changeMembers('G', { add: ['d'], remove: [] });
      expect((await s.engine.getConversation('G'))?.large).toBe(true);
      const recall = { conv: 'G', seq: 4, sender: 'a', counts: false, recalls: [1, 2] };
      await s.postMessages([recall]);
      await s.postMessages([recall]);
      expect(await row(s, 'b', 'G')).toMatchObject({ lastSeq: 4, unread: 1, mentions: 0 });
      expect(await row(s, 'c', 'G')).toMatchObject({ lastSeq: 4, unread: 0, mentions: 0 });
      expect(await s.unread('d')).toMatchObject({ total: 0, mentions: 0 });
      for (const uid of ['b', 'c']) {
        expectTotalsConsistent(await s.engine.userState(uid));
        await sameOnClient(s, uid);
      }
      // Spent ones too: an "unread from here" does not bring them back.
      await s.engine.applyUserOps([{ type: 'unread-from', uid: 'c', conv: 'G', seq: 1 }]);
      expect(await row(s, 'c', 'G')).toMatchObject({ readSeq: 0, unread: 1, mentions: 0 });
    });

    it('large group: a mention beyond the index of 1000 pairs, recalled, is dropped', async () => {
      const s = await large();
      await s.postMessages([{ conv: 'L', seq: 1, sender: 'a', mentions: ['b'] }]);
      // 1000 newer pairs (c mentioned in 2..1001) push (1, b) out of the index.
      for (let from = 2; from <= 1001; from += 500) {
        const seqs = Array.from({ length: Math.min(500, 1002 - from) }, (_, i) => from + i);
        await s.postMessages(seqs.map((seq) => ({ conv: 'L', seq, sender: 'a', mentions: ['c'] })));
      }
      expect(await row(s, 'b', 'L')).toMatchObject({ unread: 1001, mentions: 1 });
      await s.postMessages([{ conv: 'L', seq: 1002, sender: 'a', counts: false, recalls: [1] }]);
      expect(await row(s, 'b', 'L')).toMatchObject({ lastSeq: 1002, unread: 1000, mentions: 0 });
      expect(await row(s, 'c', 'L')).toMatchObject({ unread: 1000, mentions: 1000 });
      expectTotalsConsistent(await s.engine.userState('b'));
      await sameOnClient(s, 'b');
      // A recall the index still covers drops only that mention.
      await s.postMessages([{ conv: 'L', seq: 1003, sender: 'a', counts: false, recalls: [1001] }]);
      expect(await row(s, 'c', 'L')).toMatchObject({ unread: 999, mentions: 999 });
    });

    // Found by the conformance model run with topics (seed 381): a topic's sync restates every
    // member, and a restatement carried the conversation's non-counting seqs (those sent ahead of
    // their message) into the records of a read-diffused conversation. A restatement changes
    // nothing: the recall has dropped the mention for everyone, and seq 3 does not count when it comes.
    for (const topic of [undefined, 't']) {
      it(`large group${topic ? "'s topic" : ''}: restating a member changes nothing after a recall of a mention made while write-diffused and one ahead of its message`, async () => {
        const s = new SyncService(await use(), { largeGroupThreshold: 2 });
        const conv = topic ? `g#t:${topic}` : 'g';
        const at = topic ? { topic } : {};
        await s.changeMembers('g', { add: ['a', 'b'], remove: [], category: 'group' });
        await s.postMessages([{ conv: 'g', seq: 1, sender: 'a', mentions: ['b'], ...at }]);
        await s.changeMembers('g', { add: ['c'], remove: [] });
        expect((await s.engine.getConversation(conv))?.large).toBe(true);
        // Seq 1 recalled while read-diffused, and seq 3 before its message.
        await s.postMessages([{ conv: 'g', seq: 2, sender: 'a', counts: false, recalls: [1, 3], ...at }]);
        expect(await row(s, 'b', conv)).toMatchObject({ lastSeq: 2, unread: 0, mentions: 0 });
        // b added again (already a member): a restatement of the same membership.
        await s.changeMembers('g', { add: ['b', 'd'], remove: [] });
        expect(await row(s, 'b', conv)).toMatchObject({ lastSeq: 2, unread: 0, mentions: 0 });
        await s.postMessages([{ conv: 'g', seq: 3, sender: 'a', mentions: ['b'], ...at }]);
        expect(await row(s, 'b', conv)).toMatchObject({ lastSeq: 3, unread: 0, mentions: 0 });
        await sameOnClient(s, 'b');
      });
    }
  });
}
