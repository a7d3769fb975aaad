import { describe, expect, it } from 'vitest';
import type { ConvState, Cursor } from '../../protocol/types.js';
import type { Engine, UserOp } from '../../server/engine/engine.js';
import { UNSEEN_EPOCH } from '../../server/engine/engine.js';
import type { UseEngine } from './conformance.js';
import { expectTotalsConsistent, join, leave, message, mulberry32, one, read, rebuild, sorted } from './conformance-helpers.js';

/** The pull half of the conformance suite: cursors, paging, snapshots and trimming. */
export function pullConformance(use: UseEngine): void {
  describe('pull', () => {
    it('a first pull brings an empty snapshot and every entry; an unknown user has the unseen epoch', async () => {
      const e = await use();
      const empty = await e.pull('nobody', null, 100);
      expect(empty).toEqual({ epoch: UNSEEN_EPOCH, snapshot: { v: 0, convs: [] }, entries: [], version: 0, more: false, largeConvs: [], mutedMentions: false });
      expect((await e.userState('nobody')).epoch).toBe(UNSEEN_EPOCH);
      expect(await e.position('nobody')).toEqual({ epoch: UNSEEN_EPOCH, version: 0 });
      // Asking about a user (or refusing an op of one) creates nothing: it stays unseen.
      expect(await one(e, read('nobody', 'c', 3))).toEqual({ changed: false, member: false, epoch: UNSEEN_EPOCH, version: 0, state: null });
      const results = await e.applyUserOps([join('u', 'c'), message('u', 'c', 2), join('u', 'd', 0, 'x', true)]);
      const p = await e.pull('u', null, 100);
      expect(p.snapshot).toEqual({ v: 0, convs: [] });
      expect(p.entries).toEqual(results.map((r, i) => ({ v: i + 1, conv: i === 2 ? 'd' : 'c', state: r.state })));
      expect(p).toMatchObject({ version: 3, more: false, epoch: results[0]?.epoch, largeConvs: ['d'] });
      expect(p.epoch).not.toBe(UNSEEN_EPOCH);
      expect(await e.position('u')).toEqual({ epoch: p.epoch, version: 3 });
    });

    it('a pull from a cursor brings only the entries after it', async () => {
      const e = await use();
      const [r1] = await e.applyUserOps([join('u', 'c'), message('u', 'c', 1)]);
      const cursor: Cursor = { epoch: r1!.epoch, version: 2 };
      expect(await e.pull('u', cursor, 100)).toMatchObject({ entries: [], version: 2, more: false });
      const later = await e.applyUserOps([message('u', 'c', 2), read('u', 'c', 2)]);
      const p = await e.pull('u', cursor, 100);
      expect(p.snapshot).toBeUndefined();
      expect(p.entries).toEqual([
        { v: 3, conv: 'c', state: later[0]?.state },
        { v: 4, conv: 'c', state: later[1]?.state },
      ]);
      expect(p.version).toBe(4);
    });

    it('long catch-ups come in pages', async () => {
      const e = await use();
      const ops = [join('u', 'c'), ...Array.from({ length: 9 }, (_, i) => message('u', 'c', i + 1))];
      const [first] = await e.applyUserOps(ops);
      const pages: [number[], boolean][] = [];
      let since: Cursor | null = null;
      for (let i = 0; i < 10; i++) {
        const p = await e.pull('u', since, 3);
        pages.push([p.entries.map((x) => x.v), p.more]);
        since = { epoch: p.epoch, version: p.version };
        if (!p.more) break;
      }
      expect(pages).toEqual([
        [[1, 2, 3], true],
        [[4, 5, 6], true],
        [[7, 8, 9], true],
        [[10], false],
      ]);
      expect(since).toEqual({ epoch: first?.epoch, version: 10 });
    });

    it('a cursor from another epoch, or ahead of the stream, gets a snapshot', async () => {
      const e = await use();
      await e.applyUserOps([join('u', 'c'), message('u', 'c', 1)]);
      const other = await e.pull('u', { epoch: 'not-this-one', version: 1 }, 100);
      expect(other.snapshot).toEqual({ v: 0, convs: [] });
      expect(other.entries.map((x) => x.v)).toEqual([1, 2]);
      const ahead = await e.pull('u', { epoch: other.epoch, version: 50 }, 100);
      expect(ahead.snapshot).toBeDefined();
      expect(ahead.version).toBe(2);
    });

    it('an empty cursor epoch is a wildcard (a bare since=N): it continues, unlike no cursor', async () => {
      const e = await use();
      await e.applyUserOps([join('u', 'c'), message('u', 'c', 1), message('u', 'c', 2)]);
      const bare = await e.pull('u', { epoch: '', version: 1 }, 100);
      expect(bare.snapshot).toBeUndefined();
      expect(bare.entries.map((x) => x.v)).toEqual([2, 3]);
      expect((await e.pull('u', null, 100)).snapshot).toBeDefined();
    });

    it('a snapshot comes every snapshotEvery entries; a far-behind cursor jumps to it', async () => {
      const e = await use({ snapshotEvery: 5, streamMaxLen: 1000 });
      const results = await e.applyUserOps([join('u', 'c'), ...Array.from({ length: 11 }, (_, i) => message('u', 'c', i + 1))]);
      const p = await e.pull('u', null, 100);
      expect(p.snapshot).toEqual({ v: 10, convs: [results[9]?.state] });
      expect(p.entries.map((x) => x.v)).toEqual([11, 12]);
      const epoch = p.epoch;
      expect((await e.pull('u', { epoch, version: 1 }, 100)).snapshot?.v).toBe(10);
      const near = await e.pull('u', { epoch, version: 8 }, 100);
      expect(near.snapshot).toBeUndefined();
      expect(near.entries.map((x) => x.v)).toEqual([9, 10, 11, 12]);
      // Exactly one interval behind still continues; one more jumps to the snapshot.
      expect((await e.pull('u', { epoch, version: 7 }, 100)).snapshot).toBeUndefined();
      expect((await e.pull('u', { epoch, version: 6 }, 100)).snapshot?.v).toBe(10);
    });

    it('the snapshot interval is the conversation count (at least snapshotEvery, at most streamMaxLen)', async () => {
      const e = await use({ snapshotEvery: 2, streamMaxLen: 1000 });
      const joins = ['a', 'b', 'c', 'd', 'e'].map((c) => join('u', c));
      await e.applyUserOps([...joins, ...Array.from({ length: 10 }, (_, i) => message('u', 'a', i + 1))]);
      // Versions 1..15: the interval grows with each join (2, 2, 3, 4, 5): a snapshot at v2, then
      // every 5 entries once the user is in 5 conversations: v7 and v12.
      const p = await e.pull('u', null, 100);
      expect(p.snapshot?.v).toBe(12);
      expect(sorted(p.snapshot?.convs.map((s) => s.conv) ?? [])).toEqual(['a', 'b', 'c', 'd', 'e']);
      expect(p.entries.map((x) => x.v)).toEqual([13, 14, 15]);
      // History older than one interval (5) is gone: a cursor at 9 is below the base (10).
      expect((await e.pull('u', { epoch: p.epoch, version: 9 }, 100)).snapshot?.v).toBe(12);
      expect((await e.pull('u', { epoch: p.epoch, version: 10 }, 100)).snapshot).toBeUndefined();
      const capped = await use({ snapshotEvery: 2, streamMaxLen: 4 });
      await capped.applyUserOps([...joins.map((j) => ({ ...j, uid: 'v' })), ...Array.from({ length: 10 }, (_, i) => message('v', 'a', i + 1))]);
      // Capped at 4 entries: a snapshot at v2 (interval 2), then every 4: v6, v10, v14.
      expect((await capped.pull('v', null, 100)).snapshot?.v).toBe(14);
    });

    it('after trimming, a pull from ANY cursor rebuilds exactly the current state', async () => {
      const e = await use({ snapshotEvery: 3, streamMaxLen: 5 });
      await trimmedHistoryCase(e, ['c1', 'c2'], 40, 7);
    });

    it('the same for a user in many conversations with a long stream (one of them read-diffused)', async () => {
      // 20 conversations: an interval of 20, so 20–25 entries kept and snapshots of 20 states.
      const e = await use({ snapshotEvery: 3, streamMaxLen: 60 });
      await trimmedHistoryCase(
        e,
        Array.from({ length: 20 }, (_, i) => `conversation-${i}`),
        300,
        11,
      );
    });
  });
}

/**
 * Random messages, reads, leaves and rejoins of one user over `convs` (the last one read-diffused),
 * then a pull from every version ever given rebuilds the current state, and every snapshot met
 * equals the state at its version.
 */
async function trimmedHistoryCase(e: Engine, convs: readonly string[], steps: number, seed: number): Promise<void> {
  // The state at every version, from the op results alone (independent of the stream).
  const history: Map<string, ConvState>[] = [new Map()];
  const track = async (op: UserOp): Promise<void> => {
    const r = await one(e, op);
    if (!r.changed) return;
    expect(r.version).toBe(history.length);
    const next = new Map(history.at(-1));
    if (r.state) next.set(op.conv, r.state);
    else next.delete(op.conv);
    history.push(next);
  };
  const large = convs.length > 2 ? convs.at(-1) : undefined;
  const joinOf = (conv: string, head = 0): UserOp => join('u', conv, head, 'private', conv === large);
  const rand = mulberry32(seed);
  for (const c of convs) await track(joinOf(c));
  for (let i = 0; i < steps; i++) {
    const conv = convs[Math.floor(rand() * convs.length)]!;
    const kind = rand();
    if (kind < 0.6) await track(message('u', conv, i + 1, 0, rand() < 0.3 ? [i + 1] : []));
    else if (kind < 0.9) await track(read('u', conv, i));
    else {
      await track(leave('u', conv));
      await track(joinOf(conv, i));
    }
  }
  const state = await e.userState('u');
  const expected = sorted(state.states, (s) => s.conv);
  expect(state.version).toBe(history.length - 1);
  expect(sorted([...history.at(-1)!.values()], (s) => s.conv)).toEqual(expected);
  expectTotalsConsistent(state);
  // The stream was trimmed: a cursor older than the retained history gets a snapshot.
  expect((await e.pull('u', { epoch: state.epoch, version: 1 }, 1000)).snapshot?.v).toBeGreaterThan(1);
  const largeConvs = (await e.pull('u', null, 1)).largeConvs;
  expect(largeConvs).toEqual(large && history.at(-1)?.has(large) ? [large] : []);
  for (let v = 0; v <= state.version; v++) {
    const rebuilt = await rebuild(e, 'u', { epoch: state.epoch, version: v }, history[v]!, 4, history);
    expect(
      sorted([...rebuilt.values()], (s) => s.conv),
      `cursor ${v}`,
    ).toEqual(expected);
  }
  const fresh = await rebuild(e, 'u', null, new Map(), 2, history);
  expect(sorted([...fresh.values()], (s) => s.conv)).toEqual(expected);
}
