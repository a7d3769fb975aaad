import { afterEach, describe, expect, it } from 'vitest';
import type { Finding } from '../../server/admin/checks.js';
import { addPage, emptyPage, type ReconcilePage } from '../../server/admin/reconcile.js';
import { LocalToolbox, type Toolbox } from '../../server/admin/toolbox.js';
import { adminOf } from '../../server/engine/admin.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { controlledEngine } from '../sync/controlled-engine.js';
import { deferred } from '../sync/interleavings.js';
import { STORE_OPTIONS, type TestStore, THRESHOLD } from './stores.js';

/** Runs a whole reconcile walk (every page) and sums what it found and did. */
export async function walk(toolbox: Toolbox, repair: boolean, graceMs = 0): Promise<ReconcilePage> {
  const total = emptyPage();
  let cursor = '';
  for (let pages = 0; pages < 10_000; pages++) {
    const page = await toolbox.reconcile({ cursor, count: 7, repair, graceMs });
    addPage(total, page);
    cursor = page.cursor;
    if (cursor === '') return total;
  }
  throw new Error('the walk never ended');
}

const kinds = (findings: readonly Finding[]): string[] => [...new Set(findings.map((f) => f.kind))].sort();

/**
 * A store after ordinary use: joins, leaves (tombstones), a rejoin, switches between write and
 * read diffusion both ways, a category change, mentions, reads, deletes, mutes.
 */
export async function ordinaryWorkload(sync: SyncService): Promise<void> {
  await sync.changeMembers('g1', { add: ['ann', 'ben'], remove: [], category: 'group' });
  await sync.changeMembers('dm', { add: ['ann', 'cat'], remove: [] });
  await sync.changeMembers('big', { add: ['ann', 'ben', 'cat', 'dan'], remove: [] });
  for (let seq = 1; seq <= 5; seq++) await sync.postMessages([{ conv: 'g1', seq, sender: 'ben', mentions: ['ann'] }]);
  await sync.postMessages([
    { conv: 'dm', seq: 1, sender: 'cat' },
    { conv: 'dm', seq: 2, sender: 'cat' },
    { conv: 'big', seq: 1, sender: 'dan', mentions: ['ann'] },
  ]);
  await sync.read('ann', 'g1', 3);
  await sync.deleteConversation('cat', 'dm');
  await sync.updateSettings('ben', 'g1', { muted: true });
  await sync.changeMembers('big', { add: [], remove: ['dan'] });
  await sync.postMessages([{ conv: 'big', seq: 2, sender: 'ann' }]);
  await sync.changeMembers('big', { add: ['dan', 'eve'], remove: [], category: 'team' });
  await sync.postMessages([{ conv: 'big', seq: 3, sender: 'eve', mentions: ['ben'] }]);
  await sync.changeMembers('g1', { add: [], remove: ['ben'] });
  await sync.postMessages([{ conv: 'g1', seq: 6, sender: 'ann' }]);
  await sync.changeMembers('g1', { add: ['ben'], remove: [] });
}

export type MakeStore = () => Promise<TestStore>;

/** The toolbox against one kind of store. */
export function toolboxSuite(name: string, makeStore: MakeStore): void {
  describe(`the operator's toolbox: ${name}`, () => {
    const stores: TestStore[] = [];
    afterEach(async () => {
      for (const s of stores.splice(0)) await s.cleanup();
    });
    const fresh = async (): Promise<{ store: TestStore; sync: SyncService }> => {
      const store = await makeStore();
      stores.push(store);
      return { store, sync: new SyncService(store.engine, { largeGroupThreshold: THRESHOLD }) };
    };

    it('reconcile finds nothing on a store after ordinary use (tombstones, rejoins, mode switches)', async () => {
      const { store, sync } = await fresh();
      await ordinaryWorkload(sync);
      const report = await walk(store.toolbox, false);
      expect(report.findings).toEqual([]);
      expect(report.users).toBeGreaterThanOrEqual(5);
      expect(report.conversations).toBe(3);
    });

    it('a pending join and a rewrite in flight are no findings when they land within the grace period', async () => {
      const { store, sync } = await fresh();
      await sync.changeMembers('g', { add: ['ann', 'ben', 'cat'], remove: [] });
      await sync.postMessages([{ conv: 'g', seq: 1, sender: 'ann' }]);
      // Hold the user steps of a change that adds dan (and switches g to read diffusion).
      const release = deferred();
      const reached = deferred();
      const { engine } = controlledEngine(store.engine, (p) => {
        if (p.method !== 'applyUserOps' || p.phase !== 'before') return { kind: 'pass' };
        reached.resolve();
        return { kind: 'hold', release: release.promise };
      });
      const changing = new SyncService(engine, { largeGroupThreshold: THRESHOLD }).changeMembers('g', { add: ['dan'], remove: [] });
      await reached.promise;
      // A message meets dan listed but not joined: a pending record.
      await sync.postMessages([{ conv: 'g', seq: 2, sender: 'ben', mentions: ['dan'] }]);
      expect(kinds((await walk(store.toolbox, false, 0)).findings)).toEqual(expect.arrayContaining(['missing-join', 'unfinished-rewrite']));
      // The grace period is waited out on events, not a clock: both checks have made their first
      // pass (they found the pending join and the rewrite) before the change is let go, and their
      // second pass comes once it has landed.
      let inGrace = 0;
      const bothInGrace = deferred();
      const graceWait = async (): Promise<void> => {
        if (++inGrace === 2) bothInGrace.resolve();
        await changing;
      };
      const toolbox = new LocalToolbox(store.engine, adminOf(store.engine), { ...STORE_OPTIONS, largeGroupThreshold: THRESHOLD, graceWait });
      const checks = Promise.all([
        toolbox.reconcile({ users: ['dan'], repair: false, graceMs: 400 }),
        toolbox.reconcile({ conversations: ['g'], repair: false, graceMs: 400 }),
      ]);
      await bothInGrace.promise;
      release.resolve();
      const [user, conv] = await checks;
      await changing;
      expect([...user.findings, ...conv.findings]).toEqual([]);
      expect(conv.midRewrite).toBe(1);
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
      expect((await sync.unread('dan')).mentions).toBe(1);
    });

    it('reconcile finds and repairs a wrong total, a missing record and a stream head behind the version; clients resync', async () => {
      const { store, sync } = await fresh();
      await ordinaryWorkload(sync);
      const before = await sync.unread('ann');
      const cursor = { epoch: before.epoch, version: before.version };
      await store.corrupt.setStoredTotal('ann', 999);
      await store.corrupt.removeRecord('cat', 'big');
      await store.corrupt.dropStreamTail('ben', 2);
      const found = await walk(store.toolbox, false);
      // Cat's lost record also leaves her stored member count and her stream's replay wrong (and
      // on Redis her stored index of read-diffused conversations).
      expect(kinds(found.findings).filter((k) => k !== 'large-index')).toEqual(['member-count', 'missing-join', 'snapshot', 'stream', 'totals']);
      expect([...new Set(found.findings.map((f) => f.uid))].sort()).toEqual(['ann', 'ben', 'cat']);
      expect(found.findings.find((f) => f.kind === 'totals')?.uid).toBe('ann');
      expect(found.findings.filter((f) => f.kind === 'missing-join').map((f) => [f.uid, f.conv])).toEqual([['cat', 'big']]);

      const repaired = await walk(store.toolbox, true);
      expect(repaired.unrepaired).toEqual([]);
      expect(kinds(repaired.repaired)).toEqual(kinds(found.findings));
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
      // Repairing again changes nothing.
      expect((await walk(store.toolbox, true)).findings).toEqual([]);

      expect((await sync.unread('ann')).total).toBe(before.total);
      const cat = await sync.unread('cat');
      expect(cat.conversations.map((c) => c.conv)).toContain('big');
      // Ben's stream restarted under a new epoch: a client at its old cursor gets a snapshot
      // that holds what the records hold.
      const benBefore = await sync.position('ben');
      const pulled = await sync.pull('ben', { epoch: 'old-epoch', version: 1 });
      expect(pulled.snapshot?.v).toBe(pulled.version);
      expect(pulled.epoch).toBe(benBefore.epoch);
      const shown = (await sync.unread('ben')).conversations.map((c) => c.conv);
      expect(pulled.snapshot?.convs.map((s) => s.conv).sort()).toEqual(expect.arrayContaining(shown));
      // Ann's totals were the only thing wrong: her cursor still continues.
      const ann = await sync.pull('ann', cursor);
      expect(ann.snapshot).toBeUndefined();
    });

    it('a member record of a conversation that no longer lists the user is left, the rules way', async () => {
      const { store, sync } = await fresh();
      await ordinaryWorkload(sync);
      await store.corrupt.removeMember('dm', 'ann');
      const found = await walk(store.toolbox, true);
      // (A Redis conversation also stores its member count, which then disagrees too.)
      expect(found.findings.filter((f) => f.kind !== 'conv-member-count').map((f) => [f.kind, f.uid, f.conv])).toEqual([['stale-member', 'ann', 'dm']]);
      expect(found.unrepaired).toEqual([]);
      expect((await sync.unread('ann')).conversations.map((c) => c.conv)).not.toContain('dm');
    });

    it('a write-diffused member behind the head gets it; a record ahead of its conversation is put behind the roster', async () => {
      const { store, sync } = await fresh();
      await ordinaryWorkload(sync);
      const rec = await store.readRecord('ann', 'g1');
      if (!rec) throw new Error('no record');
      await store.corrupt.setRecord('ann', { ...rec, lastSeq: 2 });
      const cat = await store.readRecord('cat', 'dm');
      if (!cat) throw new Error('no record');
      await store.corrupt.setRecord('cat', { ...cat, gen: cat.gen + 10_000_000, member: false });
      const found = await walk(store.toolbox, true);
      expect(kinds(found.findings)).toEqual(expect.arrayContaining(['behind-head', 'generation-ahead']));
      expect(found.unrepaired).toEqual([]);
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
      expect((await sync.unread('ann')).conversations.find((c) => c.conv === 'g1')?.lastSeq).toBe(6);
      expect((await sync.unread('cat')).conversations.map((c) => c.conv)).toContain('dm');
    });

    it('inspect shows one user on one screen, and a conversation', async () => {
      const { store, sync } = await fresh();
      await ordinaryWorkload(sync);
      const ann = await store.toolbox.inspectUser('ann');
      const summary = await sync.unread('ann');
      expect(ann.totals.shown).toEqual({ total: summary.total, mentions: summary.mentions, categories: summary.categories });
      expect(ann.version).toBe(summary.version);
      expect(ann.findings).toEqual([]);
      expect(ann.conversations.map((c) => [c.conv, c.status, c.mode])).toEqual([
        ['big', 'member', 'read'],
        ['dm', 'member', 'write'],
        ['g1', 'member', 'write'],
      ]);
      const big = await store.toolbox.inspectConversation('big');
      expect(big).toMatchObject({ conv: 'big', mode: 'read', memberCount: 5, category: 'team', maxSeq: 3, rewrite: 0 });
      expect(await store.toolbox.inspectConversation('nope')).toBeNull();
      expect((await store.toolbox.inspectUser('ben')).conversations.find((c) => c.conv === 'g1')?.status).toBe('member');
    });

    it('erase forgets a user everywhere and leaves no trace; the others stay right', async () => {
      const { store, sync } = await fresh();
      await ordinaryWorkload(sync);
      // A join of ann in flight (the conversation cap's claim): erased with the rest.
      await store.engine.claimJoins('later', ['ann'], { cap: 100, holdMs: 60_000 });
      const result = await store.toolbox.eraseUser('ann', { scan: true });
      expect(result.conversations).toEqual(['big', 'dm', 'g1']);
      expect(await store.traces('ann')).toEqual([]);
      expect(await store.toolbox.traces('ann')).toEqual({ state: false, listedIn: [] });
      expect((await sync.unread('ann')).conversations).toEqual([]);
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
      // Erasing again is a no-op.
      expect((await store.toolbox.eraseUser('ann', { scan: true })).conversations).toEqual([]);
    });

    it('delete for all removes a conversation and its share of every total; later messages get 404; a retry is harmless', async () => {
      const { store, sync } = await fresh();
      await ordinaryWorkload(sync);
      const annBefore = await sync.unread('ann');
      const share = annBefore.conversations.find((c) => c.conv === 'g1');
      const deleted = await store.toolbox.deleteConversation('g1');
      expect(deleted?.members).toBe(2);
      const annAfter = await sync.unread('ann');
      expect(annAfter.conversations.map((c) => c.conv)).not.toContain('g1');
      expect(annAfter.total).toBe(annBefore.total - (share?.unread ?? 0));
      await expect(sync.postMessages([{ conv: 'g1', seq: 7, sender: 'ann' }])).rejects.toMatchObject({ code: 'unknown_conversation' });
      expect(await store.toolbox.deleteConversation('g1')).toBeNull();
      expect(await store.toolbox.inspectConversation('g1')).toBeNull();
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
      // Re-created under the same id, it is a new conversation: its members join it afresh.
      await sync.changeMembers('g1', { add: ['ann', 'cat'], remove: [] });
      await sync.postMessages([{ conv: 'g1', seq: 7, sender: 'cat' }]);
      expect((await sync.unread('ann')).conversations.find((c) => c.conv === 'g1')?.unread).toBe(1);
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
    });

    it("re-asserting a head raises every write-diffused member's lastSeq as a message would, and only the head of a large group", async () => {
      const { store, sync } = await fresh();
      await ordinaryWorkload(sync);
      const result = await store.toolbox.reassertHeads([
        { conv: 'dm', maxSeq: 9 },
        { conv: 'big', maxSeq: 8 },
        { conv: 'dm', maxSeq: 4 },
        { conv: 'nope', maxSeq: 3 },
      ]);
      expect(result).toEqual({
        heads: [
          { conv: 'big', maxSeq: 8 },
          { conv: 'dm', maxSeq: 9 },
        ],
        unknown: ['nope'],
      });
      const ann = await sync.unread('ann');
      expect(ann.conversations.find((c) => c.conv === 'dm')).toMatchObject({ lastSeq: 9, readSeq: 0, unread: 9 });
      expect(ann.conversations.find((c) => c.conv === 'big')?.lastSeq).toBe(8);
      // Nobody's readSeq moved; again is a no-op.
      const again = await store.toolbox.reassertHeads([{ conv: 'dm', maxSeq: 9 }]);
      expect(again.heads).toEqual([{ conv: 'dm', maxSeq: 9 }]);
      expect((await sync.unread('ann')).version).toBe(ann.version);
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
    });

    /** g: ann, ben, cat (write diffusion) and big: four members (read diffusion), both raised to a timestamp by ben. */
    const BAD = 1_796_520_749_000;
    const wrongHeads = async (sync: SyncService): Promise<void> => {
      await sync.changeMembers('g', { add: ['ann', 'ben', 'cat'], remove: [] });
      await sync.changeMembers('big', { add: ['ann', 'ben', 'cat', 'dan'], remove: [] });
      await sync.postMessages([
        { conv: 'g', seq: 1, sender: 'ben' },
        { conv: 'g', seq: 2, sender: 'ben' },
        { conv: 'big', seq: 1, sender: 'ben' },
      ]);
      await sync.read('ann', 'g', 1);
      await sync.postMessages([
        { conv: 'g', seq: BAD, sender: 'ben', mentions: ['ann'] },
        { conv: 'big', seq: BAD, sender: 'ben', mentions: ['ann'] },
      ]);
      await sync.read('cat', 'g', BAD);
      await sync.read('cat', 'big', BAD);
    };
    const stateOf = async (sync: SyncService, uid: string, conv: string) => (await sync.unread(uid)).conversations.find((c) => c.conv === conv);

    it('rebase lowers a head a timestamp raised, with every member: lastSeq, readSeq, mentions, totals; streams start over', async () => {
      const { store, sync } = await fresh();
      await wrongHeads(sync);
      expect((await sync.unread('ann')).total).toBeGreaterThan(BAD);
      const annBefore = await sync.position('ann');
      expect(await store.toolbox.rebase('g', 2)).toMatchObject({ conv: 'g', before: BAD, head: 2, members: 3 });
      expect(await store.toolbox.rebase('big', 1)).toMatchObject({ conv: 'big', before: BAD, head: 1, members: 4 });
      expect(await store.toolbox.heads(['g', 'big'])).toEqual({ g: 2, big: 1 });
      expect(await stateOf(sync, 'ann', 'g')).toMatchObject({ lastSeq: 2, readSeq: 1, unread: 1, mentions: 0 });
      expect(await stateOf(sync, 'ben', 'g')).toMatchObject({ lastSeq: 2, readSeq: 2, unread: 0 });
      expect(await stateOf(sync, 'cat', 'g')).toMatchObject({ lastSeq: 2, readSeq: 2, unread: 0 });
      expect(await stateOf(sync, 'ann', 'big')).toMatchObject({ lastSeq: 1, unread: 1, mentions: 0 });
      expect(await stateOf(sync, 'cat', 'big')).toMatchObject({ lastSeq: 1, readSeq: 1, unread: 0 });
      expect((await sync.unread('ann')).total).toBe(2);
      // A new epoch: clients take a snapshot instead of keeping what they held.
      expect((await sync.position('ann')).epoch).not.toBe(annBefore.epoch);
      // Dense seqs count from the new heads on, and nothing is left inconsistent.
      await sync.postMessages([
        { conv: 'g', seq: 3, sender: 'ben' },
        { conv: 'big', seq: 2, sender: 'ben' },
      ]);
      expect(await stateOf(sync, 'cat', 'g')).toMatchObject({ lastSeq: 3, unread: 1 });
      expect(await stateOf(sync, 'dan', 'big')).toMatchObject({ lastSeq: 2, unread: 2 });
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
      // To 0: the conversation starts over; an unknown one is null.
      expect(await store.toolbox.rebase('g', 0)).toMatchObject({ before: 3, head: 0 });
      expect(await stateOf(sync, 'cat', 'g')).toMatchObject({ lastSeq: 0, readSeq: 0, unread: 0 });
      expect(await store.toolbox.rebase('nope', 1)).toBeNull();
    });

    it('rebase forgets what a read-diffused conversation kept above the new head: non-counting and @all seqs', async () => {
      const { store, sync } = await fresh();
      await sync.changeMembers('big', { add: ['ann', 'ben', 'cat', 'dan'], remove: [] });
      await sync.postMessages([
        { conv: 'big', seq: 1, sender: 'ben' },
        { conv: 'big', seq: 2, sender: 'ben' },
        // Above the head the rebase goes back to: an @all, a mention, a recall of a seq not sent yet.
        { conv: 'big', seq: 5, sender: 'ben', mentionAll: true },
        { conv: 'big', seq: 6, sender: 'ben', mentions: ['ann'] },
        { conv: 'big', seq: 7, sender: 'ben', counts: false, recalls: [8] },
      ]);
      expect(await store.toolbox.rebase('big', 2)).toMatchObject({ before: 7, head: 2 });
      // Seqs 3..8 are other messages now: all count, only 8's mention of cat is a mention.
      await sync.postMessages([3, 4, 5, 6, 7, 8].map((seq) => ({ conv: 'big', seq, sender: 'dan', ...(seq === 8 ? { mentions: ['cat'] } : {}) })));
      expect(await stateOf(sync, 'ann', 'big')).toMatchObject({ lastSeq: 8, unread: 8, mentions: 0 });
      expect(await stateOf(sync, 'cat', 'big')).toMatchObject({ lastSeq: 8, unread: 8, mentions: 1 });
      expect((await sync.pull('ann', null)).nocount?.big).toBeUndefined();
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
    });

    it('rebase with traffic in flight: a late op from before cannot bring the old head back; messages at and above the new head count', async () => {
      const { store, sync } = await fresh();
      await wrongHeads(sync);
      // 1. A bad message recorded before the rebase whose user steps land after it.
      const lateRelease = deferred();
      const lateReached = deferred();
      const late = controlledEngine(store.engine, (p) => {
        if (p.method !== 'applyUserOps' || p.phase !== 'before') return { kind: 'pass' };
        lateReached.resolve();
        return { kind: 'hold', release: lateRelease.promise };
      });
      const lateFlush = new SyncService(late.engine, { largeGroupThreshold: THRESHOLD }).postMessages([
        { conv: 'g', seq: BAD + 1, sender: 'ben', mentions: ['ann'] },
      ]);
      await lateReached.promise;
      // 2. The rebase's member steps held while a message above the new head (3) and one below
      //    it (2, again) go through whole: they land on records not yet rebased.
      const rebaseRelease = deferred();
      const rebaseReached = deferred();
      const held = controlledEngine(store.engine, (p) => {
        if (p.method !== 'applyUserOps' || p.phase !== 'before' || p.index !== 0) return { kind: 'pass' };
        rebaseReached.resolve();
        return { kind: 'hold', release: rebaseRelease.promise };
      });
      const toolbox = new LocalToolbox(held.engine, adminOf(store.engine), { ...STORE_OPTIONS, largeGroupThreshold: THRESHOLD });
      const rebasing = toolbox.rebase('g', 2);
      await rebaseReached.promise;
      await sync.postMessages([{ conv: 'g', seq: 3, sender: 'ben', mentions: ['cat'] }]);
      await sync.postMessages([{ conv: 'g', seq: 2, sender: 'ben' }]);
      rebaseRelease.resolve();
      expect(await rebasing).toMatchObject({ before: BAD + 1, head: 2, members: 3 });
      lateRelease.resolve();
      await lateFlush;
      expect(await store.toolbox.heads(['g'])).toEqual({ g: 3 });
      expect(await stateOf(sync, 'ann', 'g')).toMatchObject({ lastSeq: 3, readSeq: 1, unread: 2, mentions: 0 });
      expect(await stateOf(sync, 'ben', 'g')).toMatchObject({ lastSeq: 3, readSeq: 2, unread: 1 });
      expect(await stateOf(sync, 'cat', 'g')).toMatchObject({ lastSeq: 3, readSeq: 2, unread: 1 });
      expect((await walk(store.toolbox, false)).findings).toEqual([]);
      // The same messages again (a retried flush) change nothing.
      await sync.postMessages([{ conv: 'g', seq: 3, sender: 'ben' }]);
      expect(await stateOf(sync, 'ann', 'g')).toMatchObject({ lastSeq: 3, unread: 2 });
    });
  });
}
