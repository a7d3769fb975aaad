import { FINDING_KINDS, type Finding } from '../../protocol/admin-replies.js';
import type { ConvState } from '../../protocol/types.js';
import { type ConversationView, type RawConversation, type RawUser, totalsOfRecords } from '../engine/admin.js';
import { type StoredConv, sameState, toConvState } from '../engine/rules.js';

export type { Finding };
/**
 * The invariants the design promises, checked on raw stored state (pure functions: the
 * reconciler reads, these judge). A finding names what is wrong; the reconciler knows how each
 * kind is repaired (reconcile-repair.ts).
 *
 * What is legal and is NOT a finding:
 * - a non-member record: a member who left (a tombstone carrying the leave's generation), a
 *   record of a deleted conversation, or a pending one (a message reached a user the
 *   conversation listed before its join landed) — as long as the conversation does not list the
 *   user (then the join is missing: `missing-join`);
 * - a stream or snapshot that expired while idle (STREAM_IDLE_SECONDS), or an empty stream right
 *   after a restart of its history;
 * - the mode or category of a member record differing from its conversation's while that
 *   conversation is mid-rewrite (`#r` set): the rewrite is under way. Such conversations are
 *   counted as `midRewrite` (no finding); one still mid-rewrite after the grace period is
 *   `unfinished-rewrite` (a membership change failed halfway and was never retried).
 */
export { FINDING_KINDS };

export interface UserCheckOptions {
  /** Streams and snapshots expire while idle (then a missing one is legal). */
  streamsExpire: boolean;
}

/** Every finding about one user, given the conversation views of the conversations its records name. */
export function checkUser(raw: RawUser, views: ReadonlyMap<string, ConversationView>, options: UserCheckOptions): Finding[] {
  return [...checkDerived(raw, options), ...checkMemberships(raw, views)];
}

/** What the records determine: totals, counts, the index, the stream and the snapshot. */
export function checkDerived(raw: RawUser, options: UserCheckOptions): Finding[] {
  const out: Finding[] = [];
  const uid = raw.uid;
  const members = raw.records.filter((r) => r.member);
  const meta = raw.meta;
  if (!meta) {
    if (members.length > 0) out.push({ kind: 'stream', uid, detail: `${members.length} member record(s) but no stream meta` });
    return out;
  }
  const want = totalsOfRecords(raw.records);
  const have = meta.totals;
  const categoriesDiffer = !sameCounts(want.categories, have.categories);
  if (want.total !== have.total || want.mentions !== have.mentions || categoriesDiffer) {
    out.push({
      kind: 'totals',
      uid,
      detail: `stored total ${have.total} mentions ${have.mentions} ${show(have.categories)}, records sum to ${want.total} mentions ${want.mentions} ${show(want.categories)}`,
    });
  }
  if (meta.memberCount !== members.length) out.push({ kind: 'member-count', uid, detail: `stored ${meta.memberCount}, ${members.length} member records` });
  const large = members.filter((r) => r.large).map((r) => r.conv);
  if (!sameSet(large, raw.largeIndex))
    out.push({ kind: 'large-index', uid, detail: `index [${[...raw.largeIndex].sort().join(',')}], records [${large.sort().join(',')}]` });

  const held = meta.version - meta.base;
  const orderOk = meta.base <= meta.snapshotVersion && meta.snapshotVersion <= meta.version;
  const expired = raw.stream.length === 0 && (options.streamsExpire || held === 0);
  if (!orderOk || (raw.stream.length !== held && !expired)) {
    out.push({
      kind: 'stream',
      uid,
      detail: `version ${meta.version}, base ${meta.base}, snapshot ${meta.snapshotVersion}: the stream holds ${raw.stream.length} entries, ${held} expected`,
    });
    return out;
  }
  if (expired && held > 0) return out;
  if (!raw.snapshot) {
    if (!options.streamsExpire) out.push({ kind: 'snapshot', uid, detail: `no snapshot at version ${meta.snapshotVersion}` });
    return out;
  }
  const replayed = replay(raw.snapshot.convs, raw.stream.afterSnapshot, meta.snapshotVersion);
  const mismatch = replayed === null ? 'entries after the snapshot are not consecutive' : differs(replayed, members.map(toConvState));
  if (mismatch)
    out.push({ kind: 'snapshot', uid, detail: `replaying snapshot v${meta.snapshotVersion} and ${raw.stream.afterSnapshot.length} entries: ${mismatch}` });
  return out;
}

/** Each record against its conversation's view of the user. */
function checkMemberships(raw: RawUser, views: ReadonlyMap<string, ConversationView>): Finding[] {
  const out: Finding[] = [];
  const uid = raw.uid;
  for (const rec of raw.records) {
    const conv = rec.conv;
    const view = views.get(conv);
    if (!view?.exists || !view.info) {
      if (rec.member) out.push({ kind: 'stale-member', uid, conv, detail: 'member record of a conversation that does not exist' });
      continue;
    }
    const info = view.info;
    if (rec.gen > info.gen) {
      out.push({ kind: 'generation-ahead', uid, conv, detail: `record generation ${rec.gen}, conversation ${info.gen}` });
      continue;
    }
    if (!view.tag) {
      if (rec.member) out.push({ kind: 'stale-member', uid, conv, detail: 'member record, but the conversation does not list the user' });
      continue;
    }
    if (!rec.member || rec.joinGen !== view.tag.joinGen) {
      out.push({ kind: 'missing-join', uid, conv, detail: `listed since generation ${view.tag.joinGen}; record ${describe(rec)}` });
      continue;
    }
    if (view.rewrite === 0 && (rec.large !== info.large || rec.category !== info.category)) {
      out.push({
        kind: 'stale-mode',
        uid,
        conv,
        detail: `record ${rec.large ? 'read' : 'write'}-diffused "${rec.category}", conversation ${info.large ? 'read' : 'write'}-diffused "${info.category}"`,
      });
    }
    if (!info.large && !rec.large && rec.lastSeq < info.maxSeq)
      out.push({ kind: 'behind-head', uid, conv, detail: `lastSeq ${rec.lastSeq}, head ${info.maxSeq}` });
  }
  return out;
}

/** A conversation's own fields, and each listed member's record (`records[i]` is `conv.members[i]`'s). */
export function checkConversation(conv: RawConversation, records: readonly (StoredConv | null)[]): Finding[] {
  const id = conv.info.conv;
  if (conv.deleting)
    return [{ kind: 'unfinished-delete', conv: id, detail: `deletion of generation ${conv.info.gen}, ${conv.members.length} member(s) to remove` }];
  const out: Finding[] = [];
  if (conv.storedCount !== conv.members.length)
    out.push({ kind: 'conv-member-count', conv: id, detail: `stored ${conv.storedCount}, ${conv.members.length} members` });
  if (conv.rewrite !== 0) out.push({ kind: 'unfinished-rewrite', conv: id, detail: `rewrite of generation ${conv.rewrite} pending` });
  conv.members.forEach((tag, i) => {
    const rec = records[i] ?? null;
    if (!rec?.member || rec.joinGen !== tag.joinGen) {
      // The user's own check reports a record ahead of the conversation.
      if (rec && rec.gen > conv.info.gen) return;
      out.push({ kind: 'missing-join', uid: tag.uid, conv: id, detail: `listed since generation ${tag.joinGen}; record ${rec ? describe(rec) : 'missing'}` });
    }
  });
  return out;
}

/** The states the snapshot and the entries after it rebuild; null when versions are not consecutive. */
function replay(snapshot: readonly ConvState[], entries: RawUser['stream']['afterSnapshot'], from: number): Map<string, ConvState> | null {
  const held = new Map(snapshot.map((s) => [s.conv, s]));
  let at = from;
  for (const e of entries) {
    if (e.v !== at + 1) return null;
    at = e.v;
    if (e.state) held.set(e.conv, e.state);
    else held.delete(e.conv);
  }
  return held;
}

function differs(replayed: ReadonlyMap<string, ConvState>, records: readonly ConvState[]): string | null {
  const want = new Map(records.map((s) => [s.conv, s]));
  for (const [conv, state] of want) {
    const got = replayed.get(conv);
    if (!got) return `${conv} missing`;
    if (!sameState(got, state)) return `${conv} replays to ${JSON.stringify(got)}, record ${JSON.stringify(state)}`;
  }
  for (const conv of replayed.keys()) if (!want.has(conv)) return `${conv} replayed but not a member record`;
  return null;
}

function sameCounts(a: ReadonlyMap<string, number>, b: ReadonlyMap<string, number>): boolean {
  const nonZero = (m: ReadonlyMap<string, number>): [string, number][] => [...m].filter(([, n]) => n !== 0);
  const x = nonZero(a);
  const y = new Map(nonZero(b));
  return x.length === y.size && x.every(([k, n]) => y.get(k) === n);
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const set = new Set(b);
  return a.length === set.size && a.every((x) => set.has(x));
}

function show(categories: ReadonlyMap<string, number>): string {
  return `{${[...categories].map(([k, n]) => `${k}:${n}`).join(',')}}`;
}

function describe(rec: StoredConv): string {
  if (!rec.member) return rec.gen === 0 ? 'pending (no membership yet)' : `not a member (generation ${rec.gen})`;
  return `member since generation ${rec.joinGen}`;
}
