import type { Cluster, Redis } from 'ioredis';
import { type BadgeClaim, type BadgeMarks, type BadgeRelease, type ClaimOptions, DELIVERED_TTL_MS, type DeliveredBadge } from '../badge-marks.js';
import { asArray, asNumber, asString, asStrings } from './codec.js';
import { hookClaimsKey, hookConvsKey, hookCoolKey, hookDeliveredKey, hookDirtyKey, hookPresenceKey, SLOTS, shardOf, slotShard, userKeyHead } from './keys.js';
import type { ScriptCommands } from './scripts.js';

export interface RedisBadgeMarksDeps {
  client: (Redis | Cluster) & ScriptCommands;
  prefix: string;
  cluster: boolean;
}

/** Slots whose sets are looked for in one round of EXISTS (a cluster's shards are its 16,384 slots). */
const SLOTS_PER_PROBE = 1_024;
/** A probe of a cluster's slots is reused this long (a mark in a slot the last probe found empty waits up to this). */
const PROBE_EVERY_MS = 1_000;

/**
 * The Redis engine's badge marks (../badge-marks.ts): the sets of keys.ts `hookDirtyKey` and its
 * siblings, one of each on one Redis, one per slot on a cluster (a user step marks its user in the
 * user's slot: one script, one slot). Each method is one script per shard (lua/hook/).
 */
export class RedisBadgeMarks implements BadgeMarks {
  readonly minPollMs: number;
  /** The last probe of a cluster's slots (shards()). */
  private probed: { at: number; shards: string[] } | undefined;

  constructor(private readonly deps: RedisBadgeMarksDeps) {
    this.minPollMs = deps.cluster ? 1_000 : 0;
  }

  async claimUsers(now: number, leaseMs: number, max: number, options: ClaimOptions = {}): Promise<BadgeClaim[]> {
    const { client, prefix } = this.deps;
    const out: BadgeClaim[] = [];
    for (const shard of await this.shards()) {
      if (out.length >= max) break;
      const reply = asArray(
        await client.hookClaim(
          hookDirtyKey(prefix, shard),
          hookClaimsKey(prefix, shard),
          hookCoolKey(prefix, shard),
          userKeyHead(prefix),
          now,
          leaseMs,
          max - out.length,
          options.socketlessOnly ? '1' : '0',
        ),
      );
      const lease = asNumber(reply[0]);
      for (let i = 1; i + 2 < reply.length; i += 3) {
        const text = asString(reply[i + 2]);
        out.push({ uid: asString(reply[i]), lease, dueAt: asNumber(reply[i + 1]), delivered: deliveredOf(text) });
      }
    }
    return out;
  }

  async release(claim: BadgeClaim, outcome: BadgeRelease): Promise<void> {
    const { client, prefix } = this.deps;
    const shard = this.shardOfUser(claim.uid);
    const keys = [hookDirtyKey(prefix, shard), hookClaimsKey(prefix, shard), hookCoolKey(prefix, shard)];
    if (outcome.kind === 'retry') {
      await client.hookRelease(...keys, userKeyHead(prefix), claim.uid, claim.lease, 'r', outcome.at);
      return;
    }
    const { seq, badge } = outcome.delivered;
    await client.hookRelease(...keys, userKeyHead(prefix), claim.uid, claim.lease, 'd', outcome.coolUntil, `${seq}|${badge}`, DELIVERED_TTL_MS);
  }

  async takeConversations(now: number, coolUntil: number, max: number): Promise<string[]> {
    const { client, prefix } = this.deps;
    const out: string[] = [];
    for (const shard of await this.shards()) {
      if (out.length >= max) break;
      out.push(...asStrings(await client.hookTakeConvs(hookConvsKey(prefix, shard), hookCoolKey(prefix, shard), now, coolUntil, max - out.length)));
    }
    return out;
  }

  async markUsers(uids: readonly string[], now: number): Promise<void> {
    await this.mark(uids, now, 'NX');
  }

  private async mark(uids: readonly string[], now: number, flag: 'NX' | 'LT'): Promise<void> {
    const { client, prefix } = this.deps;
    const byShard = new Map<string, string[]>();
    for (const uid of uids) {
      const shard = this.shardOfUser(uid);
      const list = byShard.get(shard);
      if (list) list.push(uid);
      else byShard.set(shard, [uid]);
    }
    await Promise.all([...byShard].map(([shard, list]) => client.hookMarkUsers(hookDirtyKey(prefix, shard), now, flag, ...list)));
  }

  async setPresence(process: string, uids: readonly string[], until: number | null, now: number): Promise<void> {
    const { client, prefix } = this.deps;
    await Promise.all(uids.map((uid) => client.hookPresence(hookPresenceKey(prefix, uid), process, until ?? '')));
    // The last socket closed: a mark put off while it lived is due now.
    if (until === null) await this.mark(uids, now, 'LT');
  }

  /** A user's shard: its slot's on a cluster (keys.ts shardOf over any key of the user), '' on one Redis. */
  private shardOfUser(uid: string): string {
    return shardOf(hookDeliveredKey(this.deps.prefix, uid), this.deps.cluster);
  }

  /**
   * The shards that may hold work: '' on one Redis; on a cluster, the slots where any of the
   * hook's sets exists, probed with one EXISTS per slot in pipelined rounds of SLOTS_PER_PROBE
   * at most once per PROBE_EVERY_MS (a cluster's drainer polls at most once a second,
   * `minPollMs`, and a mark in a slot the last probe found empty waits for the next): the price
   * of marking in the user's own slot, paid by the drainer, never by ingest. ~16k EXISTS a
   * second per process; a per-master index of the slots holding marks would remove it.
   */
  private async shards(): Promise<string[]> {
    if (!this.deps.cluster) return [''];
    const now = Date.now();
    if (this.probed && now - this.probed.at < PROBE_EVERY_MS) return this.probed.shards;
    const { client, prefix } = this.deps;
    const found: string[] = [];
    for (let start = 0; start < SLOTS; start += SLOTS_PER_PROBE) {
      const shards = Array.from({ length: Math.min(SLOTS_PER_PROBE, SLOTS - start) }, (_, i) => slotShard(start + i));
      const counts = await Promise.all(
        shards.map((shard) => client.exists(hookDirtyKey(prefix, shard), hookClaimsKey(prefix, shard), hookConvsKey(prefix, shard))),
      );
      shards.forEach((shard, i) => {
        if ((counts[i] ?? 0) > 0) found.push(shard);
      });
    }
    this.probed = { at: now, shards: found };
    return found;
  }
}

function deliveredOf(text: string): DeliveredBadge | null {
  const bar = text.indexOf('|');
  if (bar < 0) return null;
  return { seq: Number(text.slice(0, bar)), badge: text.slice(bar + 1) };
}
