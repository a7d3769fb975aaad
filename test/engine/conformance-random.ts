import { expect } from 'vitest';
import type { ConvState } from '../../protocol/types.js';
import type { Engine, UserOp } from '../../server/engine/engine.js';
import { applyRule, contribution, sameRecord, toConvState, type StoredConv } from '../../server/engine/rules.js';
import { expectTotalsConsistent, rebuild, sorted } from './conformance-helpers.js';

const USERS = ['u1', 'u2', 'u3'];
const CONVS = ['c1', 'c2', 'c3', 'c4'];
const CATEGORIES = ['private', 'group'];

interface ModelUser {
  convs: Map<string, StoredConv>;
  version: number;
  epoch?: string;
}

/**
 * Random ops in random batches, checked after every batch against rules.ts applied directly
 * (the reference model): every result, every state, and totals that equal the sum of the
 * conversations' contributions. Ends with a full pull per user rebuilding the same state.
 */
export async function randomizedOps(e: Engine, rand: () => number, count: number): Promise<void> {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)]!;
  const int = (max: number): number => Math.floor(rand() * (max + 1));
  const bool = (): boolean => rand() < 0.5;
  const model = new Map<string, ModelUser>(USERS.map((u) => [u, { convs: new Map(), version: 0 }]));

  const randomOp = (): UserOp => {
    const uid = pick(USERS);
    const conv = pick(CONVS);
    const r = rand();
    if (r < 0.35) {
      const lastSeq = 1 + int(40);
      const mentionSeqs = rand() < 0.3 ? [lastSeq, int(lastSeq)] : [];
      return { type: 'message', uid, conv, lastSeq, readSeq: rand() < 0.2 ? lastSeq : 0, mentionSeqs };
    }
    if (r < 0.55) return { type: 'read', uid, conv, seq: int(40) };
    if (r < 0.68) return { type: 'join', uid, conv, head: int(20), category: pick(CATEGORIES), large: rand() < 0.15 };
    if (r < 0.72) return { type: 'leave', uid, conv };
    if (r < 0.77) return { type: 'delete', uid, conv, head: int(40) };
    if (r < 0.88) {
      const op: UserOp = { type: 'settings', uid, conv };
      if (bool()) op.muted = bool();
      if (bool()) op.markedUnread = bool();
      return op;
    }
    if (r < 0.94) return { type: 'mode', uid, conv, large: rand() < 0.4, head: int(40) };
    return { type: 'category', uid, conv, category: pick(CATEGORIES) };
  };

  let done = 0;
  while (done < count) {
    const batch = Array.from({ length: 1 + int(4) }, randomOp);
    done += batch.length;
    const results = await e.applyUserOps(batch);
    expect(results).toHaveLength(batch.length);
    batch.forEach((op, i) => {
      const user = model.get(op.uid)!;
      const before = user.convs.get(op.conv);
      const after = applyRule(before, op);
      const changed = after !== undefined && !sameRecord(before, after);
      if (changed) {
        user.convs.set(op.conv, after);
        user.version += 1;
      }
      const r = results[i]!;
      const label = `op ${done - batch.length + i}: ${JSON.stringify(op)}`;
      expect(r, label).toEqual({
        changed,
        member: after?.member ?? false,
        epoch: user.epoch ?? r.epoch,
        version: user.version,
        state: after?.member ? toConvState(after) : null,
      });
      user.epoch = r.epoch;
    });
    for (const uid of new Set(batch.map((op) => op.uid))) {
      const state = await e.userState(uid);
      const user = model.get(uid)!;
      const expected = [...user.convs.values()].filter((r) => r.member);
      expect(sorted(state.states, (s) => s.conv)).toEqual(sorted(expected.map(toConvState), (s) => s.conv));
      expectTotalsConsistent(state, `after op ${done}`);
      const sum = expected.map(contribution).reduce((acc, c) => ({ total: acc.total + c.unread, mentions: acc.mentions + c.mentions }), { total: 0, mentions: 0 });
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
