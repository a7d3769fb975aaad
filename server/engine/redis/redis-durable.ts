import type { Cluster, Redis } from 'ioredis';
import type { DirtyMark, DirtyShard, DurableStore, InspectedUser, PersistedConversation, TakenRecord } from '../durable-backing.js';
import type { MemberTag } from '../engine.js';
import { decodeMemberTag } from '../state-text.js';
import { asNumber, asStrings, type Reply } from './codec.js';
import {
  activityKey,
  convKey,
  convKeyHead,
  dirtyConvsKey,
  dirtyUsersKey,
  evictedConvMember,
  evictedKey,
  intactKey,
  legacyEvictedKey,
  mutedMentionsKey,
  SLOTS,
  shardOf,
  sharingKey,
  slotShard,
  threadsKey,
  topicsKey,
  userKeyHead,
  userKeys,
} from './keys.js';
import type { RunTracker } from './runs.js';
import type { ScriptCommands } from './scripts.js';
import { countersOf, USER_META_COUNTER_FIELDS } from './user-meta.js';

export interface RedisDurableDeps {
  client: (Redis | Cluster) & ScriptCommands;
  runs: RunTracker;
  prefix: string;
  cluster: boolean;
}

/**
 * The Redis engine's side of the durable tier (server/durable/ drives it): the dirty marks the
 * user and conversation steps leave (keys.ts), the reads the drainer persists, the
 * compare-and-clear after PostgreSQL committed, and the cold sweep's eviction — each one atomic
 * step over keys of one slot.
 */
export class RedisDurableStore implements DurableStore {
  readonly shardCount: number;

  constructor(private readonly deps: RedisDurableDeps) {
    this.shardCount = deps.cluster ? SLOTS : 1;
  }

  /** See DurableStore.markIntact: sets the missing marks only with `force`; returns how many were missing. */
  async markIntact(force: boolean): Promise<number> {
    const { prefix, client } = this.deps;
    const shards = this.deps.cluster ? Array.from({ length: SLOTS }, (_, slot) => slotShard(slot)) : [''];
    await this.convertLegacyEvicted(shards);
    const present = await Promise.all(shards.map((shard) => client.exists(intactKey(prefix, shard))));
    const missing = shards.filter((_, i) => present[i] === 0);
    if (missing.length === 0) return 0;
    if (force) await Promise.all(missing.map((shard) => client.set(intactKey(prefix, shard), String(Date.now()), 'NX')));
    return missing.length;
  }

  /**
   * Evicted sets written before they carried stamps, as sorted sets with stamp 0 (a restore that
   * saw 0 still notices a later eviction, which has a real stamp). Several processes converting at
   * once add the same members (NX: a real stamp is kept) and the first to finish deletes the set.
   */
  private async convertLegacyEvicted(shards: readonly string[]): Promise<void> {
    const { prefix, client } = this.deps;
    const legacy = shards.map((shard) => legacyEvictedKey(prefix, shard));
    const found = await Promise.all(legacy.map((key) => client.exists(key)));
    for (const [i, key] of legacy.entries()) {
      if (found[i] !== 1) continue;
      const target = evictedKey(prefix, shards[i] as string);
      let cursor = '0';
      do {
        const [next, members] = await client.sscan(key, cursor, 'COUNT', 1_000);
        cursor = next;
        if (members.length > 0) await client.zadd(target, 'NX', ...members.flatMap((m) => ['0', m]));
      } while (cursor !== '0');
      await client.del(key);
    }
  }

  async busyShards(start: number, count: number): Promise<DirtyShard[]> {
    if (!this.deps.cluster) return [''];
    const shards: string[] = [];
    for (let slot = start; slot < Math.min(SLOTS, start + count); slot++) shards.push(slotShard(slot));
    const { prefix, client } = this.deps;
    const found = await Promise.all(
      shards.map((shard) => client.exists(dirtyUsersKey(prefix, shard), dirtyConvsKey(prefix, shard), activityKey(prefix, shard))),
    );
    return shards.filter((_, i) => (found[i] ?? 0) > 0);
  }

  async dirty(shard: DirtyShard, limit: number, only?: 'users' | 'convs'): Promise<{ users: DirtyMark[]; convs: DirtyMark[] }> {
    const { prefix, client } = this.deps;
    const range = async (key: string, kind: 'users' | 'convs'): Promise<string[]> =>
      only === undefined || only === kind ? client.zrange(key, '0', String(limit - 1), 'WITHSCORES') : [];
    const [users, convs] = await Promise.all([range(dirtyUsersKey(prefix, shard), 'users'), range(dirtyConvsKey(prefix, shard), 'convs')]);
    return { users: marks(users), convs: marks(convs) };
  }

  async backlog(shards: readonly DirtyShard[]): Promise<{ marks: number; oldest: number | null }> {
    const { prefix, client } = this.deps;
    let total = 0;
    let oldest: number | null = null;
    await Promise.all(
      shards.flatMap((shard) =>
        [dirtyUsersKey(prefix, shard), dirtyConvsKey(prefix, shard)].map(async (key) => {
          const [count, first] = await Promise.all([client.zcard(key), client.zrange(key, '0', '0', 'WITHSCORES')]);
          total += count;
          const since = first[1] === undefined ? null : Number(first[1]);
          if (since !== null && (oldest === null || since < oldest)) oldest = since;
        }),
      ),
    );
    return { marks: total, oldest };
  }

  recordMarks(shard: DirtyShard): Promise<number> {
    return this.deps.client.zcard(dirtyUsersKey(this.deps.prefix, shard));
  }

  async takeRecords(shard: DirtyShard, skip: number, limit: number): Promise<TakenRecord[]> {
    const { prefix, client } = this.deps;
    const dirty = dirtyUsersKey(prefix, shard);
    const head = userKeyHead(prefix);
    // Calls of a few milliseconds of Redis each, sent together (each a consistent look; one that
    // overlaps another's marks after a clear between them only writes a row twice).
    const calls: Array<Promise<Reply>> = [];
    for (let at = 0; at < limit; at += RECORDS_PER_CALL) calls.push(client.persistTake(dirty, head, skip + at, Math.min(RECORDS_PER_CALL, limit - at)));
    const out: TakenRecord[] = [];
    const seen = new Set<string>();
    for (const reply of await Promise.all(calls)) {
      if (typeof reply !== 'string' || reply === '') continue;
      for (const line of reply.split('\n')) {
        // '<score> <uid|conv> <text>': ids hold neither spaces nor '|'.
        const a = line.indexOf(' ');
        const b = line.indexOf(' ', a + 1);
        const member = line.slice(a + 1, b);
        if (seen.has(member)) continue;
        seen.add(member);
        const bar = member.indexOf('|');
        // The score is the record's version (persist_take.lua): the row's w.
        out.push({
          member,
          uid: member.slice(0, bar),
          conv: member.slice(bar + 1),
          w: Number(line.slice(0, a)),
          text: b === line.length - 1 ? null : line.slice(b + 1),
        });
      }
    }
    return out;
  }

  async clearRecords(shard: DirtyShard, records: readonly TakenRecord[]): Promise<number> {
    const dirty = dirtyUsersKey(this.deps.prefix, shard);
    const calls: Array<Promise<Reply>> = [];
    for (let at = 0; at < records.length; at += RECORDS_PER_CALL) {
      const lines: string[] = [];
      for (let i = at; i < Math.min(records.length, at + RECORDS_PER_CALL); i++) {
        const r = records[i] as TakenRecord;
        lines.push(`${r.member} ${r.w}`);
      }
      calls.push(this.deps.client.persistClear(dirty, lines.join('\n')));
    }
    return (await Promise.all(calls)).reduce<number>((sum, reply) => sum + asNumber(reply), 0);
  }

  async readConversation(conv: string): Promise<{ state: PersistedConversation; head: string; gen: string; version: string } | null> {
    const all = await this.deps.client.hgetall(convKey(this.deps.prefix, conv));
    const head = all['#s'];
    if (head === undefined) return null;
    const members: MemberTag[] = [];
    for (const [field, value] of Object.entries(all)) if (!field.startsWith('#')) members.push(decodeMemberTag(field, value));
    const rewrite = all['#r'];
    return {
      head,
      gen: all['#g'] ?? '',
      version: clearValue('m', all),
      state: {
        maxSeq: Number(head),
        large: all['#l'] === '1',
        category: all['#c'] ?? 'default',
        gen: Number(all['#g'] ?? 0),
        rewriteGen: rewrite === undefined ? null : Number(rewrite),
        members,
        largeFrom: Number(all['#L'] ?? 0),
        parentGen: Number(all['#P'] ?? 0),
      },
    };
  }

  async readHeads(
    shard: DirtyShard,
    convs: readonly string[],
  ): Promise<Array<{ head: string; gen: number; at: number; mentionAll: number[]; nocount: number[] } | null>> {
    if (convs.length === 0) return [];
    const reply = await this.deps.client.persistReadHeads(dirtyConvsKey(this.deps.prefix, shard), convKeyHead(this.deps.prefix), convs.join('\n'));
    const heads = typeof reply === 'string' ? reply.split('\n') : [];
    if (heads.length !== convs.length) throw new Error(`persist_read_heads answered ${heads.length} heads for ${convs.length}`);
    return heads.map((h) => {
      if (h === '') return null;
      const [head = '', gen = '0', at = '0', all = '', nocount = ''] = h.split(' ');
      const seqs = (text: string): number[] => (text === '' ? [] : text.split(',').map(Number));
      return { head, gen: Number(gen), at: Number(at), mentionAll: seqs(all), nocount: seqs(nocount) };
    });
  }

  async clearHeads(shard: DirtyShard, heads: ReadonlyArray<{ conv: string; head: string | null }>): Promise<number> {
    if (heads.length === 0) return 0;
    const lines = heads.map((h) => `${h.conv} ${h.head ?? ''}`).join('\n');
    return asNumber(await this.deps.client.persistClearHeads(dirtyConvsKey(this.deps.prefix, shard), convKeyHead(this.deps.prefix), lines));
  }

  async clearConversation(mark: 'h' | 'm', conv: string, value: string | null): Promise<boolean> {
    const key = convKey(this.deps.prefix, conv);
    const dirty = dirtyConvsKey(this.deps.prefix, shardOf(key, this.deps.cluster));
    const reply: Reply = await this.deps.client.persistClearConv(dirty, key, `${mark}|${conv}`, value ?? clearValue(mark, {}), ...CLEAR_FIELDS[mark]);
    return asNumber(reply) === 1;
  }

  coldUsers(shard: DirtyShard, before: number, limit: number): Promise<string[]> {
    return this.deps.client.zrangebyscore(activityKey(this.deps.prefix, shard), '-inf', before, 'LIMIT', 0, limit);
  }

  async evict(uid: string, before: number): Promise<{ outcome: 1 | 0 | -1; convs: string[] }> {
    const k = userKeys(this.deps.prefix, uid);
    const shard = shardOf(k.meta, this.deps.cluster);
    const reply = await this.deps.client.coldEvict(
      k.meta,
      k.records,
      k.stream,
      k.snapshot,
      k.large,
      activityKey(this.deps.prefix, shard),
      dirtyUsersKey(this.deps.prefix, shard),
      evictedKey(this.deps.prefix, shard),
      k.claims,
      sharingKey(this.deps.prefix, uid),
      mutedMentionsKey(this.deps.prefix, uid),
      uid,
      before,
    );
    if (Array.isArray(reply)) return { outcome: 1, convs: asStrings(reply) };
    return { outcome: asNumber(reply) === 0 ? 0 : -1, convs: [] };
  }

  async evictableConversation(conv: string, maxMembers: number): Promise<{ head: string; gen: string } | null> {
    const { prefix, client } = this.deps;
    // The member count first: a large roster is not read whole just to be skipped.
    if (Number((await client.hget(convKey(prefix, conv), '#n')) ?? Number.POSITIVE_INFINITY) > maxMembers) return null;
    const all = await client.hgetall(convKey(prefix, conv));
    const head = all['#s'];
    if (head === undefined) return null;
    const members = Object.keys(all).filter((f) => !f.startsWith('#'));
    // One EXISTS per member (each its own hash tag), pipelined by auto-pipelining.
    const present = await Promise.all(members.map((uid) => client.exists(userKeys(prefix, uid).meta)));
    if (present.some((n) => n > 0)) return null;
    return { head, gen: all['#g'] ?? '0' };
  }

  async evictConversation(conv: string, head: string, gen: string): Promise<boolean> {
    const { prefix, client, cluster } = this.deps;
    const key = convKey(prefix, conv);
    const shard = shardOf(key, cluster);
    const reply: Reply = await client.convEvict(
      key,
      dirtyConvsKey(prefix, shard),
      evictedKey(prefix, shard),
      topicsKey(prefix, conv),
      threadsKey(prefix, conv),
      conv,
      head,
      gen,
      evictedConvMember(conv),
    );
    return asNumber(reply) === 1;
  }

  async inspectUser(uid: string): Promise<InspectedUser> {
    const { prefix, client, cluster } = this.deps;
    const k = userKeys(prefix, uid);
    const [meta, fields] = await Promise.all([client.hmgetBuffer(k.meta, 'e', ...USER_META_COUNTER_FIELDS), client.hgetall(k.records)]);
    const records = new Map(Object.entries(fields));
    const convs = [...records.keys()];
    const marked = new Set<string>();
    if (convs.length > 0) {
      const dirty = dirtyUsersKey(prefix, shardOf(k.meta, cluster));
      const scores = await client.zmscore(dirty, ...convs.map((conv) => `${uid}|${conv}`));
      for (const [i, conv] of convs.entries()) if (scores[i] != null) marked.add(conv);
    }
    return { present: meta[0] != null, w: countersOf(meta.slice(1))?.w ?? 0, records, marked };
  }

  async markUser(uid: string, convs: readonly string[]): Promise<void> {
    if (convs.length === 0) return;
    const { prefix, client, cluster } = this.deps;
    const meta = userKeys(prefix, uid).meta;
    const dirty = dirtyUsersKey(prefix, shardOf(meta, cluster));
    // A mark's score is the version its record is written to PostgreSQL with (persist_take.lua):
    // the user's write clock, which orders it after every row of the user already there. NX: a
    // mark there already carries its record's last change. (A change between the read and the
    // mark raises the mark past this; a drain between them clears it, and this older score then
    // writes the same state again, which PostgreSQL keeps at its newer version.)
    const w = countersOf(await client.hmgetBuffer(meta, ...USER_META_COUNTER_FIELDS))?.w || Date.now();
    await client.zadd(dirty, 'NX', ...convs.flatMap((conv) => [w, `${uid}|${conv}`]));
  }

  async inspectConversation(conv: string): Promise<{ head: string; gen: string; parentGen: number; marked: { h: boolean; m: boolean } } | null> {
    const { prefix, client, cluster } = this.deps;
    const key = convKey(prefix, conv);
    const [fields, scores] = await Promise.all([
      client.hmget(key, '#s', '#g', '#P'),
      client.zmscore(dirtyConvsKey(prefix, shardOf(key, cluster)), `h|${conv}`, `m|${conv}`),
    ]);
    const head = fields[0];
    if (head == null) return null;
    return { head, gen: fields[1] ?? '0', parentGen: Number(fields[2] ?? 0), marked: { h: scores[0] != null, m: scores[1] != null } };
  }

  async markConversation(mark: 'h' | 'm', conv: string): Promise<void> {
    const { prefix, client, cluster } = this.deps;
    const key = convKey(prefix, conv);
    await client.zadd(dirtyConvsKey(prefix, shardOf(key, cluster)), 'NX', Date.now(), `${mark}|${conv}`);
  }
}

/**
 * The fields of a conversation's hash a mark's clear compares (persist_clear_conv.lua): a head's
 * '#s'; a roster's generation '#g' and the parent generation a topic's child holds '#P' (a sync
 * raises it alone when the roster it brings is the one the child has: conv_members.lua marks that
 * too, and PostgreSQL must get it before the mark goes).
 */
const CLEAR_FIELDS = { h: ['#s'], m: ['#g', '#P'] } as const;

/** What persist_clear_conv.lua compares the fields' values to, as read now. */
function clearValue(mark: 'h' | 'm', all: Record<string, string>): string {
  return CLEAR_FIELDS[mark].map((field) => all[field] ?? '').join('|');
}

/** Records read or cleared per call: a few milliseconds of Redis at most. */
const RECORDS_PER_CALL = 500;

function marks(flat: string[]): DirtyMark[] {
  const out: DirtyMark[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push({ member: flat[i] as string, since: Number(flat[i + 1]) });
  return out;
}
