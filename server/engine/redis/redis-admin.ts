import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import { RedpointError } from '../../../protocol/errors.js';
import type { ConversationView, DeleteStep, EngineAdmin, RawConversation, RawMeta, RawUser, RebaseStep, ScanPage } from '../admin.js';
import type { MemberTag } from '../engine.js';
import type { StoredConv } from '../rules.js';
import { decodeEntries, decodeMemberTag, decodeRecord, decodeSnapshotText, encodeRecord } from '../state-text.js';
import { asArray, asNumber, asStrings } from './codec.js';
import { convInfo } from './conv-info.js';
import { convKey, dirtyConvsKey, hookDeliveredKey, hookPresenceKey, shardOf, type UserKeys, userChannel, userKeys } from './keys.js';
import type { RunTracker } from './runs.js';
import type { ScriptCommands } from './scripts.js';

type AdminClient = (Redis | Cluster) & ScriptCommands;

/** What RedisAdmin needs of its engine: the engine's own connection, run tracking and settings. */
export interface RedisAdminDeps {
  client: Redis | Cluster;
  runs: RunTracker;
  prefix: string;
  idleSeconds: number;
  publish: 'PUBLISH' | 'SPUBLISH';
  /**
   * Durable tier: puts back conversations Redis lacks from PostgreSQL (RedisEngine's restore).
   * A conversation missing from Redis is then no evidence that it does not exist: the cold sweep
   * evicts conversations, and a restored member may be back before its conversation is.
   */
  restoreConversations?: (convs: readonly string[]) => Promise<unknown>;
  /** A Redis Cluster (the dirty set of a conversation is then its slot's). */
  cluster: boolean;
  /** The durable tier is on: a rebased roster is marked for PostgreSQL. */
  durable: boolean;
}

/** How long beginDelete waits for the clock to pass a conversation's generations before taking one anyway. */
const CLOCK_WAIT_MS = 2_000;
const CONV_FIELD = '#';

/**
 * The Redis engine's EngineAdmin. Per-user steps are Lua scripts over the user's hash-tagged
 * keys, per-conversation steps scripts over the conversation's, so everything runs unchanged on
 * a Redis Cluster. Walks SCAN every master in turn (the cursor names the master and its SCAN
 * cursor), matching the key names of keys.ts.
 */
export class RedisAdmin implements EngineAdmin {
  readonly streamsExpire: boolean;
  private readonly client: AdminClient;

  constructor(private readonly deps: RedisAdminDeps) {
    this.client = deps.client as AdminClient;
    this.streamsExpire = deps.idleSeconds > 0;
  }

  async scanUsers(cursor: string, count: number): Promise<ScanPage> {
    const prefix = globEscape(this.deps.prefix);
    return this.scan(cursor, count, `${prefix}:{u:*}:[mc]`, async (node, keys) => {
      // A user is found by its meta key, or by its records when it has no meta.
      const records = keys.filter((k) => k.endsWith(':c'));
      const metas = await Promise.all(records.map((k) => node.exists(`${k.slice(0, -2)}:m`)));
      const uids = new Set<string>();
      for (const key of keys) {
        const uid = userOfKey(this.deps.prefix, key);
        if (uid === undefined) continue;
        if (key.endsWith(':m') || metas[records.indexOf(key)] === 0) uids.add(uid);
      }
      return [...uids];
    });
  }

  async scanConversations(cursor: string, count: number): Promise<ScanPage> {
    const prefix = globEscape(this.deps.prefix);
    return this.scan(cursor, count, `${prefix}:{c:*`, async (_node, keys) => {
      const convs = new Set<string>();
      for (const key of keys) {
        const conv = convOfKey(this.deps.prefix, key);
        if (conv !== undefined) convs.add(conv);
      }
      return [...convs];
    });
  }

  async readUser(uid: string): Promise<RawUser> {
    const k = userKeys(this.deps.prefix, uid);
    let currentRunId = '';
    const reply = asArray(
      await this.deps.runs.userScript(k.meta, (runId) => {
        currentRunId = runId;
        return this.client.adminUserRead(...keyList(k));
      }),
    );
    const meta = pairs(asStrings(reply[0]));
    const recordFields = asStrings(reply[1]);
    const records: StoredConv[] = [];
    for (let i = 0; i + 1 < recordFields.length; i += 2) records.push(decodeRecord(recordFields[i] ?? '', recordFields[i + 1] ?? ''));
    const rawMeta = parseMeta(meta, currentRunId);
    const sv = rawMeta?.snapshotVersion ?? 0;
    const snapshotText = reply[4];
    return {
      uid,
      meta: rawMeta,
      records,
      largeIndex: asStrings(reply[5]),
      stream: { length: asNumber(reply[2]), afterSnapshot: decodeEntries(asStrings(reply[3]), sv + 1) },
      snapshot: typeof snapshotText === 'string' ? { v: sv, convs: decodeSnapshotText(snapshotText) } : sv === 0 && rawMeta ? { v: 0, convs: [] } : null,
      ttl: { stream: asNumber(reply[6]), snapshot: asNumber(reply[7]) },
    };
  }

  async readConversation(conv: string): Promise<RawConversation | null> {
    const key = convKey(this.deps.prefix, conv);
    const live = await this.client.hgetall(key);
    if (live['#s'] !== undefined) return rawConversation(conv, live, false);
    const deletion = await this.client.hgetall(deletionKey(key));
    return deletion['#g'] !== undefined ? rawConversation(conv, deletion, true) : null;
  }

  async conversationViews(uid: string, convs: readonly string[]): Promise<Map<string, ConversationView>> {
    // One HMGET per conversation (each its own hash tag), pipelined by auto-pipelining.
    const read = (list: readonly string[]) =>
      Promise.all(list.map((conv) => this.client.hmget(convKey(this.deps.prefix, conv), '#s', '#l', '#c', '#g', '#n', '#r', uid)));
    const replies = await read(convs);
    const missing = [...convs.keys()].filter((i) => replies[i]?.[0] == null);
    if (missing.length > 0 && this.deps.restoreConversations) {
      await this.deps.restoreConversations(missing.map((i) => convs[i] as string));
      const again = await read(missing.map((i) => convs[i] as string));
      missing.forEach((i, j) => {
        replies[i] = again[j] ?? [];
      });
    }
    const out = new Map<string, ConversationView>();
    convs.forEach((conv, i) => {
      const r = replies[i] ?? [];
      if (r[0] == null) {
        out.set(conv, { exists: false, info: null, rewrite: 0, tag: null });
        return;
      }
      const tag = r[6];
      out.set(conv, { exists: true, info: convInfo(conv, r), rewrite: Number(r[5] ?? 0), tag: tag == null ? null : decodeMemberTag(uid, tag) });
    });
    return out;
  }

  async records(list: readonly { uid: string; conv: string }[]): Promise<(StoredConv | null)[]> {
    const texts = await Promise.all(list.map(({ uid, conv }) => this.client.hget(userKeys(this.deps.prefix, uid).records, conv)));
    return texts.map((text, i) => (text == null ? null : decodeRecord(list[i]?.conv ?? '', text)));
  }

  async rebuildUser(uid: string, options: { restream: boolean }): Promise<void> {
    const k = userKeys(this.deps.prefix, uid);
    await this.deps.runs.userScript(k.meta, (runId) =>
      this.client.adminUserRebuild(
        ...keyList(k),
        nanoid(12),
        runId,
        options.restream ? '1' : '0',
        this.deps.idleSeconds,
        userChannel(this.deps.prefix, uid),
        this.deps.publish,
      ),
    );
  }

  async repairConversation(conv: string, minGen: number): Promise<RawConversation | null> {
    await this.client.adminConvRepair(convKey(this.deps.prefix, conv), minGen);
    return this.readConversation(conv);
  }

  async rebaseConversation(conv: string, seq: number): Promise<RebaseStep | null> {
    const key = convKey(this.deps.prefix, conv);
    const dirty = dirtyConvsKey(this.deps.prefix, shardOf(key, this.deps.cluster));
    let reply = await this.client.adminConvRebase(key, dirty, seq, this.deps.durable ? Date.now() : '', conv);
    // Durable: a conversation evicted to PostgreSQL is still a conversation; put it back first.
    if (reply === null && this.deps.restoreConversations) {
      await this.deps.restoreConversations([conv]);
      reply = await this.client.adminConvRebase(key, dirty, seq, this.deps.durable ? Date.now() : '', conv);
    }
    if (reply === null) return null;
    const parts = asArray(reply);
    const flat = asStrings(parts[5]);
    const members: MemberTag[] = [];
    for (let i = 0; i < flat.length; i += 2) members.push(decodeMemberTag(flat[i] as string, flat[i + 1] as string));
    return {
      before: asNumber(parts[0]),
      head: asNumber(parts[1]),
      gen: asNumber(parts[2]),
      large: asNumber(parts[3]) === 1,
      category: String(parts[4]),
      members,
    };
  }

  async wipeUser(uid: string, expected: readonly StoredConv[]): Promise<boolean> {
    const args = expected.flatMap((rec) => [rec.conv, encodeRecord(rec)]);
    const k = userKeys(this.deps.prefix, uid);
    const reply = await this.client.adminUserWipe(
      ...keyList(k),
      k.claims,
      hookDeliveredKey(this.deps.prefix, uid),
      hookPresenceKey(this.deps.prefix, uid),
      userChannel(this.deps.prefix, uid),
      this.deps.publish,
      ...args,
    );
    return asNumber(reply) === 1;
  }

  async beginDelete(conv: string): Promise<DeleteStep | null> {
    const key = convKey(this.deps.prefix, conv);
    const deadline = Date.now() + CLOCK_WAIT_MS;
    let restored = false;
    for (;;) {
      const reply = await this.client.adminConvDelete(key, deletionKey(key), Date.now() >= deadline ? '1' : '0');
      if (reply === null && this.deps.restoreConversations && !restored) {
        // Durable: gone from Redis (cold-evicted, lost) is not gone: PostgreSQL's rows would
        // bring it back on the next touch. Restore it, then delete it.
        restored = true;
        await this.deps.restoreConversations([conv]);
        continue;
      }
      if (reply === null) return null;
      const parts = asArray(reply);
      if (asNumber(parts[0]) === 0) {
        await sleep(Math.min(asNumber(parts[1]), CLOCK_WAIT_MS));
        continue;
      }
      return { gen: asNumber(parts[1]), maxSeq: asNumber(parts[2]), members: asStrings(parts[3]) };
    }
  }

  async finishDelete(conv: string, gen: number): Promise<void> {
    await this.client.adminConvDeleteFinish(deletionKey(convKey(this.deps.prefix, conv)), gen);
  }

  async convsListing(uid: string, convs: readonly string[]): Promise<string[]> {
    const found = await Promise.all(convs.map((conv) => this.client.hexists(convKey(this.deps.prefix, conv), uid)));
    return convs.filter((_, i) => found[i] === 1);
  }

  /**
   * One SCAN call on one master. The cursor is `<master index>:<SCAN cursor>` over the masters
   * sorted by address, so a walk goes through every master in turn and can be resumed.
   */
  private async scan(cursor: string, count: number, match: string, ids: (node: Redis, keys: string[]) => Promise<string[]>): Promise<ScanPage> {
    const masters = this.deps.runs.masters().sort((a, b) => address(a).localeCompare(address(b)));
    const [nodeText = '0', scanCursor = '0'] = cursor === '' ? [] : cursor.split(':');
    const index = Number(nodeText);
    const node = masters[index];
    if (!Number.isInteger(index) || !/^\d+$/.test(scanCursor)) throw new RedpointError('invalid_request', `not a walk cursor: ${cursor}`);
    if (!node) return { cursor: '', ids: [] };
    const [next, keys] = await node.scan(scanCursor, 'MATCH', match, 'COUNT', Math.max(10, count));
    const found = await ids(node, keys);
    if (next !== '0') return { cursor: `${index}:${next}`, ids: found };
    return { cursor: index + 1 < masters.length ? `${index + 1}:0` : '', ids: found };
  }
}

function keyList(k: UserKeys): string[] {
  return [k.meta, k.records, k.stream, k.snapshot, k.large];
}

/** Where a deletion keeps the roster it removes: beside the conversation hash, in its slot. */
function deletionKey(conversationKey: string): string {
  return `${conversationKey}:x`;
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

function userOfKey(prefix: string, key: string): string | undefined {
  const head = `${prefix}:{u:`;
  if (!key.startsWith(head)) return undefined;
  const close = key.indexOf('}', head.length);
  return close > head.length ? key.slice(head.length, close) : undefined;
}

function convOfKey(prefix: string, key: string): string | undefined {
  const head = `${prefix}:{c:`;
  if (!key.startsWith(head)) return undefined;
  const close = key.indexOf('}', head.length);
  const rest = key.slice(close + 1);
  return close > head.length && (rest === '' || rest === ':x') ? key.slice(head.length, close) : undefined;
}

function address(node: Redis): string {
  return `${node.options.host}:${node.options.port}`;
}

function pairs(flat: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i] ?? '', flat[i + 1] ?? '');
  return out;
}

function parseMeta(meta: Map<string, string>, currentRunId: string): RawMeta | null {
  const epoch = meta.get('e');
  if (epoch === undefined) return null;
  const num = (field: string): number => Number(meta.get(field) ?? 0);
  const categories = new Map<string, number>();
  for (const [field, value] of meta) if (field.startsWith('k:') && Number(value) !== 0) categories.set(field.slice(2), Number(value));
  return {
    epoch,
    version: num('v'),
    base: num('b'),
    snapshotVersion: num('sv'),
    memberCount: num('n'),
    totals: { total: num('t'), mentions: num('x'), categories },
    runId: meta.get('r') ?? '',
    currentRunId,
  };
}

function rawConversation(conv: string, all: Record<string, string>, deleting: boolean): RawConversation {
  const members: MemberTag[] = [];
  for (const [field, value] of Object.entries(all)) if (!field.startsWith(CONV_FIELD)) members.push(decodeMemberTag(field, value));
  const info = convInfo(conv, [all['#s'], all['#l'], all['#c'], all['#g'], deleting ? String(members.length) : all['#n']]);
  return { info, rewrite: Number(all['#r'] ?? 0), storedCount: deleting ? members.length : Number(all['#n'] ?? 0), members, deleting };
}
