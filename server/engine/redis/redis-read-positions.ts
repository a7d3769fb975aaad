import type { ConvReads, ReadDetail, ReadPosition, ReadPositions, ReadsChange } from '../read-positions.js';
import { asArray, asNumber } from './codec.js';
import { convKey, readsKey, sharingKey, userChannel } from './keys.js';
import type { ScriptedCluster, ScriptedRedis } from './scripts.js';

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
  ) {}

  async raise(items: readonly ReadPosition[]): Promise<boolean[]> {
    // One script call per conversation (its hash and its sorted set share the slot).
    const byConv = new Map<string, number[]>();
    items.forEach((item, i) => {
      const list = byConv.get(item.conv);
      if (list) list.push(i);
      else byConv.set(item.conv, [i]);
    });
    const out = items.map(() => false);
    await Promise.all(
      [...byConv].map(async ([conv, indexes]) => {
        const args = indexes.flatMap((i) => [items[i]?.uid ?? '', items[i]?.seq ?? 0]);
        const reply = asArray(await this.client.readsRaise(convKey(this.prefix, conv), readsKey(this.prefix, conv), ...args));
        indexes.forEach((i, n) => {
          out[i] = asNumber(reply[n]) === 1;
        });
      }),
    );
    return out;
  }

  async drop(uid: string, convs: readonly string[]): Promise<void> {
    await Promise.all(convs.map((conv) => this.client.zrem(readsKey(this.prefix, conv), uid)));
  }

  async read(convs: readonly string[], detail: ReadDetail): Promise<Map<string, ConvReads>> {
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

  async sharing(uids: readonly string[]): Promise<boolean[]> {
    const values = await Promise.all(uids.map((uid) => this.client.get(sharingKey(this.prefix, uid))));
    return values.map((v) => v !== '0');
  }

  async setSharing(uid: string, share: boolean): Promise<void> {
    const key = sharingKey(this.prefix, uid);
    if (share) await this.client.del(key);
    else await this.client.set(key, '0');
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

/**
 * A `reads` message on a user's channel: `!<conv>|`, then the positions as `<uid>;<seq>` joined
 * by `|`. Ids never hold `|` or `;` (ID_PATTERN), and an epoch (the first field of a change
 * message) never starts with `!`.
 */
function encodeReadsMessage(c: ReadsChange): string {
  let text = `!${c.conv}|`;
  let first = true;
  for (const [uid, seq] of Object.entries(c.reads)) {
    text += `${first ? '' : '|'}${uid};${seq}`;
    first = false;
  }
  return text;
}

export function decodeReadsMessage(uid: string, message: string): ReadsChange {
  const parts = message.slice(1).split('|');
  const conv = parts[0] ?? '';
  const reads: Record<string, number> = {};
  for (const part of parts.slice(1)) {
    const semi = part.indexOf(';');
    if (semi > 0)
      Object.defineProperty(reads, part.slice(0, semi), { value: Number(part.slice(semi + 1)), enumerable: true, writable: true, configurable: true });
  }
  return { uid, conv, reads };
}
