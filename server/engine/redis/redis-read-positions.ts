import type { ReadPositionsBacking, StoredSetting } from '../durable-backing.js';
import type { ConvReads, ReadDetail, ReadPosition, ReadPositions, ReadsChange } from '../read-positions.js';
import { asArray, asNumber, asStrings, type Reply } from './codec.js';
import { convKey, mutedMentionsKey, readsKey, sharingKey, userChannel } from './keys.js';
import type { ScriptedCluster, ScriptedRedis } from './scripts.js';
import { settingText, settingValue } from './setting-text.js';

/** The user's settings kept here: each one's key, default, and its columns' calls in the durable tier. */
const SETTINGS = {
  shareReads: {
    key: sharingKey,
    default: true,
    save: 'saveSharing',
    load: 'loadSharing',
    // A privacy setting is never guessed: with Redis and PostgreSQL both unable to say, the call fails.
    defaultWhenUnreadable: false,
  },
  mutedMentions: {
    key: mutedMentionsKey,
    default: false,
    save: 'saveMutedMentions',
    load: 'loadMutedMentions',
    // PostgreSQL down: Redis goes on serving pulls and badges (the tier is behind it, not in
    // front); a user who turned it on and whose key Redis lost too sees it off until PostgreSQL is back.
    defaultWhenUnreadable: true,
  },
} as const;
type Setting = keyof typeof SETTINGS;

/**
 * The Redis engine's read receipts: plain commands, each on one key, so each is one step in one
 * slot (Cluster-safe without a script): the registers are a sorted set per conversation raised
 * with `ZADD GT` (max-register: a lower or repeated seq changes nothing), the setting a string in
 * the user's slot. Commands of one call go out together (auto-pipelining).
 */
export class RedisReadPositions implements ReadPositions {
  constructor(
    /** The engine's guarded client (command-guard.ts): typed errors, bounded waits. */
    private readonly client: ScriptedRedis | ScriptedCluster,
    private readonly prefix: string,
    private readonly publish: 'PUBLISH' | 'SPUBLISH',
    /** The durable tier, when on: PostgreSQL's copy, and the engine's restore of conversations Redis lacks. */
    private readonly durable?: DurableReads,
  ) {}

  async raise(items: readonly ReadPosition[]): Promise<boolean[]> {
    const out = await this.raiseInRedis(items);
    const rose = items.filter((_, i) => out[i]);
    // Written through: in PostgreSQL once the call returns (a failure is the caller's: the next read repairs it).
    if (this.durable && rose.length > 0) await this.durable.backing.savePositions(rose);
    return out;
  }

  /**
   * What PostgreSQL holds of these conversations' positions, for users who share: RedisEngine's
   * restore of a conversation Redis lost writes them in the same step as the conversation
   * (conv_restore.lua), so no reader ever finds the conversation back without them.
   */
  async registersToRestore(convs: readonly string[]): Promise<Map<string, Array<[uid: string, seq: number]>>> {
    const out = new Map<string, Array<[string, number]>>();
    if (!this.durable || convs.length === 0) return out;
    const rows = await this.durable.backing.loadPositions(convs);
    const uids = [...new Set(rows.map((r) => r.uid))];
    const shares = await this.sharing(uids);
    const sharing = new Set(uids.filter((_, i) => shares[i]));
    for (const r of rows) {
      if (!sharing.has(r.uid)) continue;
      const list = out.get(r.conv);
      if (list) list.push([r.uid, r.seq]);
      else out.set(r.conv, [[r.uid, r.seq]]);
    }
    return out;
  }

  /** Restores conversations Redis lacks (the engine puts their registers back too); the ones present after. */
  private async restore(convs: readonly string[]): Promise<Set<string>> {
    if (!this.durable || convs.length === 0) return new Set();
    return this.durable.restoreConversations(convs);
  }

  private async raiseInRedis(items: ReadonlyArray<ReadPosition>): Promise<boolean[]> {
    // One script call per conversation (its hash and its sorted set share the slot).
    const byConv = new Map<string, number[]>();
    items.forEach((item, i) => {
      const list = byConv.get(item.conv);
      if (list) list.push(i);
      else byConv.set(item.conv, [i]);
    });
    const out = items.map(() => false);
    // A conversation Redis lacks (and the tier cannot restore) records nothing.
    await Promise.all(
      [...byConv].map(async ([conv, indexes]) => {
        const args = indexes.flatMap((i) => [items[i]?.uid ?? '', items[i]?.seq ?? 0]);
        const call = (): Promise<Reply> => this.client.readsRaise(convKey(this.prefix, conv), readsKey(this.prefix, conv), ...args);
        let answer = await call();
        if (answer === ABSENT && (await this.restore([conv])).has(conv)) answer = await call();
        if (answer === ABSENT) return;
        const reply = asArray(answer);
        indexes.forEach((i, n) => {
          out[i] = asNumber(reply[n]) === 1;
        });
      }),
    );
    return out;
  }

  async drop(uid: string, convs: readonly string[]): Promise<void> {
    await Promise.all(convs.map((conv) => this.client.zrem(readsKey(this.prefix, conv), uid)));
    await this.durable?.backing.deletePositions(uid, convs);
  }

  async read(convs: readonly string[], detail: ReadDetail): Promise<Map<string, ConvReads>> {
    const out = await this.readOnce(convs, detail);
    const missing = convs.filter((conv) => !out.has(conv));
    if (this.durable && missing.length > 0) {
      const restored = await this.restore(missing);
      if (restored.size > 0) for (const [conv, reads] of await this.readOnce([...restored], detail)) out.set(conv, reads);
    }
    return out;
  }

  private async readOnce(convs: readonly string[], detail: ReadDetail): Promise<Map<string, ConvReads>> {
    const seqs = detail.seqs ?? [];
    const read = convs.map(async (conv) => {
      const key = readsKey(this.prefix, conv);
      const meta = detail.member === undefined ? ['#n', '#l', '#s'] : ['#n', '#l', '#s', detail.member];
      // Sent together; read-only, so not one atomic step: a raise between them is one of the
      // orders of two separate reads anyway. Positions: at most one beyond `upTo` (a member that
      // left and whose drop is still on its way may be there).
      const [info, listed, own, ...counts] = await Promise.all([
        this.client.hmget(convKey(this.prefix, conv), ...meta),
        this.client.zrange(key, '0', String(detail.upTo), 'WITHSCORES'),
        detail.member === undefined ? null : this.client.zscore(key, detail.member),
        ...seqs.map((seq) => this.client.zcount(key, seq, '+inf')),
      ]);
      if (info[0] == null) return null;
      const memberCount = Number(info[0]);
      const large = info[1] === '1';
      const positions = new Map<string, number>();
      if (!large && memberCount <= detail.upTo) for (let i = 0; i + 1 < listed.length; i += 2) positions.set(listed[i] ?? '', Number(listed[i + 1]));
      const reads: ConvReads = {
        memberCount,
        large,
        maxSeq: Number(info[2] ?? 0),
        positions,
        counts,
        member: info[3] != null,
        own: own == null ? null : Number(own),
      };
      return [conv, reads] as const;
    });
    const out = new Map<string, ConvReads>();
    for (const found of await Promise.all(read)) if (found) out.set(found[0], found[1]);
    return out;
  }

  async peers(uid: string, convs: readonly string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const missing = await this.peersOnce(uid, convs, out);
    if (this.durable && missing.length > 0) {
      const restored = await this.restore(missing);
      if (restored.size > 0) await this.peersOnce(uid, [...restored], out);
    }
    return out;
  }

  /**
   * One reads_peers.lua call per chunk on one Redis (the keys by name: one server holds them all);
   * one call per conversation on a cluster (each routed by its own key). Returns the conversations
   * Redis lacks.
   */
  private async peersOnce(uid: string, convs: readonly string[], out: Map<string, number>): Promise<string[]> {
    const groups: string[][] = [];
    if (this.publish === 'SPUBLISH') for (const conv of convs) groups.push([conv]);
    else for (let i = 0; i < convs.length; i += PEERS_PER_CALL) groups.push(convs.slice(i, i + PEERS_PER_CALL));
    const missing: string[] = [];
    await Promise.all(
      groups.map(async (group) => {
        if (group.length === 0) return;
        const args = group.flatMap((conv) => [convKey(this.prefix, conv), readsKey(this.prefix, conv), conv]);
        const reply = asStrings(await this.client.readsPeers(convKey(this.prefix, group[0] ?? ''), uid, ...args));
        const bar = reply.indexOf('#');
        for (let i = 0; i + 1 < bar; i += 2) out.set(reply[i] ?? '', Number(reply[i + 1]));
        missing.push(...reply.slice(bar + 1));
      }),
    );
    return missing;
  }

  sharing(uids: readonly string[]): Promise<boolean[]> {
    return this.settings('shareReads', uids);
  }

  setSharing(uid: string, share: boolean): Promise<void> {
    return this.setSetting('shareReads', uid, share);
  }

  /**
   * The setting as a step read its key (pull.lua and user_state.lua read it with the user's
   * stream): no key is off without the durable tier, and undefined with it: Redis lost it (or the
   * user never set it), and mutedMentions() asks PostgreSQL.
   */
  mutedMentionsOf(raw: string): boolean | undefined {
    const on = settingValue(raw);
    return on === undefined && !this.durable ? SETTINGS.mutedMentions.default : on;
  }

  async mutedMentions(uid: string): Promise<boolean> {
    const [on] = await this.settings('mutedMentions', [uid]);
    return on ?? SETTINGS.mutedMentions.default;
  }

  setMutedMentions(uid: string, on: boolean): Promise<void> {
    return this.setSetting('mutedMentions', uid, on);
  }

  /**
   * Without the durable tier a setting at its default has no key. With it every setting is in
   * PostgreSQL first (a restore reads it when Redis has lost the key), then in Redis with the
   * revision that write made, taken only if Redis holds none as new (setting_set.lua): of two
   * processes writing at once, Redis ends with what PostgreSQL ended with.
   */
  private async setSetting(name: Setting, uid: string, on: boolean): Promise<void> {
    const setting = SETTINGS[name];
    const key = setting.key(this.prefix, uid);
    if (this.durable) {
      const rev = await this.durable.backing[setting.save](uid, on);
      await this.client.settingSet(key, settingText(on, rev));
    } else if (on === setting.default) await this.client.del(key);
    else await this.client.set(key, settingText(on));
  }

  /**
   * The setting of each of `uids`. With the tier none means Redis lost it (or the user never had
   * one): PostgreSQL says which, and it goes back into Redis with its revision (a user without a
   * row: revision 0), so a write that got there meanwhile is kept.
   */
  private async settings(name: Setting, uids: readonly string[]): Promise<boolean[]> {
    const setting = SETTINGS[name];
    const held = (await Promise.all(uids.map((uid) => this.client.get(setting.key(this.prefix, uid))))).map((raw) => settingValue(raw ?? ''));
    const unknown = uids.filter((_, i) => held[i] === undefined);
    if (!this.durable || unknown.length === 0) return held.map((on) => on ?? setting.default);
    let stored: Map<string, StoredSetting>;
    try {
      stored = await this.durable.backing[setting.load](unknown);
    } catch (err) {
      if (!setting.defaultWhenUnreadable) throw err;
      // PostgreSQL down: the default stands in, not kept, so the next read asks again.
      return held.map((on) => on ?? setting.default);
    }
    const found = new Map(
      unknown.map((uid) => {
        const row = stored.get(uid) ?? { value: setting.default, rev: 0 };
        return [uid, row] as const;
      }),
    );
    await Promise.all([...found].map(([uid, row]) => this.client.settingSet(setting.key(this.prefix, uid), settingText(row.value, row.rev))));
    return uids.map((uid, i) => held[i] ?? found.get(uid)?.value ?? setting.default);
  }

  async announce(changes: readonly ReadsChange[]): Promise<void> {
    await Promise.all(
      changes.map((c) => {
        const channel = userChannel(this.prefix, c.uid);
        const text = encodeReadsMessage(c);
        return this.publish === 'PUBLISH' ? this.client.publish(channel, text) : this.client.spublish(channel, text);
      }),
    );
  }
}

/** The durable tier as read receipts use it. */
export interface DurableReads {
  backing: ReadPositionsBacking;
  /** RedisEngine's restore of conversations Redis lacks: the ones restored. */
  restoreConversations(convs: readonly string[]): Promise<Set<string>>;
}

/** Conversations per reads_peers.lua call on one Redis (3 arguments each): bounded like the engine's other scripts. */
const PEERS_PER_CALL = 300;

/** What reads_raise.lua answers for a conversation Redis lacks. */
const ABSENT = 'absent';

/**
 * A `reads` message on a user's channel: `!<conv>|<member count>`, then `|<uid>;<seq>` per
 * position. Ids never hold `|` or `;` (ID_PATTERN), and an epoch (the first field of a change
 * message) never starts with `!`.
 */
function encodeReadsMessage(c: ReadsChange): string {
  let text = `!${c.conv}|${c.members}`;
  for (const [uid, seq] of Object.entries(c.reads)) text += `|${uid};${seq}`;
  return text;
}

export function decodeReadsMessage(uid: string, message: string): ReadsChange {
  const parts = message.slice(1).split('|');
  const conv = parts[0] ?? '';
  const members = Number(parts[1]);
  const reads: Record<string, number> = {};
  for (const part of parts.slice(2)) {
    const semi = part.indexOf(';');
    if (semi > 0)
      Object.defineProperty(reads, part.slice(0, semi), { value: Number(part.slice(semi + 1)), enumerable: true, writable: true, configurable: true });
  }
  return { uid, conv, members, reads };
}
