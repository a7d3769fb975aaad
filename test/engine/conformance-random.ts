import { expect } from 'vitest';
import type { ConvState } from '../../protocol/types.js';
import { type Engine, UNSEEN_EPOCH, type UserOp } from '../../server/engine/engine.js';
import { applyRule, contribution, type StoredConv, sameState, toConvState, visibleState } from '../../server/engine/rules.js';
import { expectTotalsConsistent, nextGen, rebuild, sorted } from './conformance-helpers.js';

const USERS = ['u1', 'u2', 'u3'];
/**
 * Issue 43: a topic's and a thread's child conversation among them (PROTOCOL.md "Topics",
 * "Threads"), whose rows the engine keeps like any other, but for the thread row's default level
 * (`mentions`), which the stored level bits are read against (rules.ts defaultLevel; the Lua reads
 * the id too). Their parents' protocols (topic syncs, follows) are above the engine: conformance-model.ts.
 */
const CONVS = ['c1', 'c2', 'c3', '__proto__', 'c1#t:a', 'c1#r:2'];
const CATEGORIES = ['private', 'group', 'constructor'];

interface ModelUser {
  convs: Map<string, StoredConv>;
  version: number;
  epoch?: string;
}

/**
 * Random ops in random batches, checked after every batch against rules.ts applied directly
 * (the reference model): every result, every state, and totals that equal the sum of the
 * conversations' contributions. Membership ops come with new, repeated and stale generations;
 * messages also reach users whose membership has not landed (pending records). Ends with a full
 * pull per user rebuilding the same state. `afterBatch` runs after each batch's results are
 * checked and before the states are read (a test that changes the stored layout in between).
 */
export async function randomizedOps(e: Engine, rand: () => number, count: number, afterBatch?: (uids: ReadonlySet<string>) => Promise<void>): Promise<void> {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
  const int = (max: number): number => Math.floor(rand() * (max + 1));
  const bool = (): boolean => rand() < 0.5;
  const model = new Map<string, ModelUser>(USERS.map((u) => [u, { convs: new Map(), version: 0 }]));

  const randomOp = (): UserOp => {
    const uid = pick(USERS);
    const conv = pick(CONVS);
    const rec = model.get(uid)?.convs.get(conv);
    const r = rand();
    if (r < 0.35) {
      const lastSeq = 1 + int(40);
      const mentionSeqs = rand() < 0.3 ? [lastSeq, int(lastSeq)] : [];
      // Sometimes the conversation's generation as a flush read it: at, below or above the
      // record's join generation (a message from before a rejoin or a rebase is ignored).
      const gen = rec && rand() < 0.3 ? { gen: Math.max(0, rec.joinGen - 1 + int(2)) } : {};
      // Issue 43: the last activity, sometimes none, in any order (a max-register).
      const at = rand() < 0.4 ? { at: 1_760_000_000_000 + int(50) } : {};
      // Issue 43: non-counting seqs (a `counts: false` message, recalls), some above lastSeq (a
      // recall before its message), some mentioned, repeated across ops.
      const nocount = rand() < 0.2 ? { nocountSeqs: [1 + int(44), lastSeq, ...(rand() < 0.3 ? mentionSeqs : [])] } : {};
      return { type: 'message', uid, conv, lastSeq, readSeq: rand() < 0.2 ? lastSeq : 0, mentionSeqs, ...gen, ...at, ...nocount };
    }
    // Some reads land exactly at readSeq: they move nothing, so a mark stays (raiseRead).
    if (r < 0.5) return { type: 'read', uid, conv, seq: rec && rand() < 0.3 ? rec.readSeq : int(40) };
    // Reads of an older, the current or a newer read generation (a device that had not seen an
    // unread-from yet, or one Redis lost), and "unread from here": the ops that lower readSeq,
    // with the generation after the record's, a repeated one (a retry) or none.
    if (r < 0.52) return { type: 'read', uid, conv, seq: int(40), gen: Math.max(0, (rec?.readGen ?? 0) - 1 + int(2)) };
    if (r < 0.57) {
      const gen = rand() < 0.2 ? {} : { gen: Math.max(0, (rec?.readGen ?? 0) + int(2) - 1) };
      // Sometimes floored at a join head, made in the record's membership or another one.
      const floor = rand() < 0.4 ? { floor: int(20), joinGen: rec && rand() < 0.7 ? rec.joinGen : nextGen() } : {};
      return { type: 'unread-from', uid, conv, seq: int(40), ...gen, ...floor };
    }
    if (r < 0.75) {
      // A new membership, a restatement of the current one (mode or category change), or a stale op.
      const gen = rand() < 0.15 && rec ? Math.max(1, rec.gen - 1 - int(2)) : nextGen();
      const restate = rec?.member && rand() < 0.4;
      return {
        type: 'membership',
        uid,
        conv,
        gen,
        member: true,
        joinGen: restate && rec ? rec.joinGen : gen,
        joinHead: restate && rec ? rec.readSeq : int(20),
        head: int(40),
        large: rand() < 0.15,
        category: pick(CATEGORIES),
        // The operator's rebase: a new membership that lowers lastSeq to `head`; or (issue 43) a
        // rewrite to write diffusion bringing the conversation's non-counting seqs ('G').
        ...(rand() < 0.15 ? { rebase: true as const } : rand() < 0.15 ? { nocountSeqs: [1 + int(44), ...(rec?.mentionSeqs.slice(0, 1) ?? [])] } : {}),
      };
    }
    if (r < 0.8) return { type: 'membership', uid, conv, gen: rand() < 0.2 && rec ? rec.gen : nextGen(), member: false };
    const op: UserOp = { type: 'settings', uid, conv };
    if (bool()) op.muted = bool();
    // Issue 43: the notification level, alone or with muted (the level wins).
    if (rand() < 0.3) op.level = pick(['all', 'mentions', 'none'] as const);
    if (bool()) op.markedUnread = bool();
    if (rand() < 0.3) op.deleteAt = int(40);
    return op;
  };

  let done = 0;
  while (done < count) {
    const batch = Array.from({ length: 1 + int(4) }, randomOp);
    done += batch.length;
    const results = await e.applyUserOps(batch);
    expect(results).toHaveLength(batch.length);
    const expected = batch.map((op) => {
      const user = model.get(op.uid)!;
      const before = user.convs.get(op.conv);
      const after = applyRule(before, op);
      const changed = !sameState(visibleState(before), visibleState(after));
      if (after) user.convs.set(op.conv, after);
      if (changed) user.version += 1;
      return { changed, member: after?.member ?? false, version: user.version, state: visibleState(after) };
    });
    batch.forEach((op, i) => {
      const user = model.get(op.uid)!;
      const r = results[i]!;
      if (user.version > 0) user.epoch ??= r.epoch;
      const label = `op ${done - batch.length + i}: ${JSON.stringify(op)}`;
      expect(r, label).toEqual({ ...expected[i], epoch: user.epoch ?? UNSEEN_EPOCH });
    });
    const touched = new Set(batch.map((op) => op.uid));
    await afterBatch?.(touched);
    for (const uid of touched) {
      const state = await e.userState(uid);
      const user = model.get(uid)!;
      const members = [...user.convs.values()].filter((r) => r.member);
      expect(sorted(state.states, (s) => s.conv)).toEqual(sorted(members.map(toConvState), (s) => s.conv));
      expectTotalsConsistent(state, `after op ${done}`);
      const sum = members
        .map(contribution)
        .reduce((acc, c) => ({ total: acc.total + c.unread, mentions: acc.mentions + c.mentions }), { total: 0, mentions: 0 });
      expect({ total: state.totals.total, mentions: state.totals.mentions }).toEqual(sum);
      expect(state.version).toBe(user.version);
    }
  }

  for (const uid of USERS) {
    const state = await e.userState(uid);
    const held = await rebuild(e, uid, null, new Map<string, ConvState>(), 3);
    expect(sorted([...held.values()], (s) => s.conv)).toEqual(sorted(state.states, (s) => s.conv));
  }
}
