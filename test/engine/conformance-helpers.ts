import { expect } from 'vitest';
import type { ConvState, Cursor } from '../../protocol/types.js';
import type { Engine, MembershipOp, RecordedMessage, StoredUserState, UserOp, UserOpResult } from '../../server/engine/engine.js';

/** The seeded PRNG the engine suites replay their randomized runs with. */
export { mulberry32 } from '../helpers/prng.js';

export function sorted<T>(list: readonly T[], key: (x: T) => string = String): T[] {
  return [...list].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

export function convWith(partial: Partial<ConvState> & { conv: string }): ConvState {
  return {
    lastSeq: 0,
    readSeq: 0,
    mentions: 0,
    muted: false,
    markedUnread: false,
    category: 'private',
    large: false,
    deletedSeq: -1,
    ...partial,
  };
}

/** The totals as the memory model computes them from the conversation states. */
export function totalsFrom(states: readonly ConvState[]): StoredUserState['totals'] {
  const totals = { total: 0, mentions: 0, categories: new Map<string, number>() };
  for (const s of states) {
    if (s.large || s.muted || s.lastSeq <= s.deletedSeq) continue;
    // Level 'mentions' (issue 43): each unread mention is one unread of the badge.
    const unread = s.level === 'mentions' ? s.mentions : Math.max(0, s.lastSeq - s.readSeq - (s.nocount ?? 0));
    totals.total += unread;
    totals.mentions += s.mentions;
    if (unread !== 0) totals.categories.set(s.category, (totals.categories.get(s.category) ?? 0) + unread);
  }
  return totals;
}

/** Totals as a plain object, for readable expectations. */
export function plainTotals(t: StoredUserState['totals']): { total: number; mentions: number; categories: Record<string, number> } {
  return { total: t.total, mentions: t.mentions, categories: Object.fromEntries(t.categories) };
}

export function expectTotalsConsistent(state: StoredUserState, label = ''): void {
  expect(state.totals, `stored totals ${label}`).toEqual(totalsFrom(state.states));
}

/**
 * What a client holds after pulling from `cursor` (holding `start`) until `more` is false.
 * Checks on the way that versions are contiguous and, given `history` (the state at every
 * version), that every snapshot equals the state at its version.
 */
export async function rebuild(
  e: Engine,
  uid: string,
  cursor: Cursor | null,
  start: ReadonlyMap<string, ConvState>,
  limit: number,
  history?: readonly (ReadonlyMap<string, ConvState> | undefined)[],
): Promise<Map<string, ConvState>> {
  const held = new Map(start);
  let since = cursor;
  for (let page = 0; page < 10_000; page++) {
    const p = await e.pull(uid, since, limit);
    let at = since?.version ?? 0;
    if (p.snapshot) {
      held.clear();
      for (const s of p.snapshot.convs) held.set(s.conv, s);
      at = p.snapshot.v;
      if (history)
        expect(
          sorted(p.snapshot.convs, (s) => s.conv),
          `snapshot v${at}`,
        ).toEqual(sorted([...(history[at]?.values() ?? [])], (s) => s.conv));
    }
    for (const entry of p.entries) {
      expect(entry.v, 'entries are contiguous').toBe(at + 1);
      at = entry.v;
      if (entry.state) held.set(entry.conv, entry.state);
      else held.delete(entry.conv);
    }
    expect(p.version).toBe(at);
    if (!p.more) return held;
    since = { epoch: p.epoch, version: p.version };
  }
  throw new Error('pull never finished');
}

export type JoinOp = Extract<MembershipOp, { member: true }>;

/** Membership generations for ops made by hand: each call a newer one. */
let generation = 1_000;
export const nextGen = (): number => ++generation;

/**
 * A membership op making `uid` a member as of a new generation. Without `tag` it starts a new
 * membership (its own join generation and head); with the tag of the current one it only
 * restates it (a mode or category change).
 */
export const join = (uid: string, conv: string, head = 0, category = 'private', large = false, tag?: { joinGen: number; joinHead: number }): JoinOp => {
  const gen = nextGen();
  return { type: 'membership', uid, conv, gen, member: true, joinGen: tag?.joinGen ?? gen, joinHead: tag?.joinHead ?? head, head, large, category };
};
export const leave = (uid: string, conv: string, gen = nextGen()): MembershipOp => ({ type: 'membership', uid, conv, gen, member: false });
export const del = (uid: string, conv: string, deleteAt: number): UserOp => ({ type: 'settings', uid, conv, deleteAt });
export const message = (uid: string, conv: string, lastSeq: number, readSeq = 0, mentionSeqs: number[] = []): UserOp => ({
  type: 'message',
  uid,
  conv,
  lastSeq,
  readSeq,
  mentionSeqs,
});
export const read = (uid: string, conv: string, seq: number): UserOp => ({ type: 'read', uid, conv, seq });

export async function one(e: Engine, op: UserOp): Promise<UserOpResult> {
  const [r] = await e.applyUserOps([op]);
  if (!r) throw new Error('applyUserOps returned no result');
  return r;
}

/** One conversation step of recordMessages. */
export async function recordOne(e: Engine, conv: string, seq: number, candidates: string[], at?: number): Promise<RecordedMessage | null> {
  const [r] = await e.recordMessages([{ conv, seq, candidates }], at);
  return r ?? null;
}

/**
 * What one pull reply that starts over holds: its snapshot, then its entries applied, sorted by
 * conversation (as `userState` lists them). Throws when the reply carries no snapshot: a caller
 * checking a snapshot's contents must not pass on a delta.
 */
export function pageStates(reply: { snapshot?: { convs: readonly ConvState[] }; entries: readonly { conv: string; state: ConvState | null }[] }): ConvState[] {
  if (!reply.snapshot) throw new Error('expected a reply that starts over from a snapshot, got a delta');
  const held = new Map(reply.snapshot.convs.map((s) => [s.conv, s]));
  for (const e of reply.entries) {
    if (e.state) held.set(e.conv, e.state);
    else held.delete(e.conv);
  }
  return sorted([...held.values()], (s) => s.conv);
}
