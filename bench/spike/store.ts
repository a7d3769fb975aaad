import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { ConvState, UnreadSummary } from '../../protocol/types.js';
import {
  emptyRegisters,
  foldStates,
  foldUnread,
  memberValue,
  mentionsByConv,
  overlayChanged,
  parseSnapshot,
  type Registers,
  scored,
  snapshotText,
} from './fold.js';
import { foldKeys, HEADS_KEY, userKeys } from './keys.js';

const LIBRARY = readFileSync(new URL('./functions.lua', import.meta.url), 'utf8');

export interface SpikeMessage {
  conv: string;
  seq: number;
  sender: string;
  mentions?: readonly string[];
}

export interface SpikePull {
  /** The user's version now (its stream's length). */
  version: number;
  /** The cursor to continue from. */
  next: number;
  states: ConvState[];
}

/**
 * The spike's store (issue 42) on one Redis: the write path raises native registers and appends
 * to a user's stream only when one moved; the read path folds the registers with rules.ts. One
 * call per message (the group-commit style allowed on one Redis: on a Cluster it would be one
 * call per member, each member's keys being in its own slot).
 */
export class SpikeStore {
  constructor(private readonly redis: Redis) {}

  async load(): Promise<void> {
    await this.redis.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY);
  }

  /** One message to the members the conversation step listed (the sender among them). */
  async message(m: SpikeMessage, members: readonly string[]): Promise<number> {
    const keys = [HEADS_KEY];
    const args: (string | number)[] = [m.conv, m.seq, members.indexOf(m.sender) + 1];
    const mentioned = new Set(m.mentions ?? []);
    for (const uid of members) {
      const k = userKeys(uid);
      keys.push(k.last, k.read, k.stream, k.mentions);
      args.push(k.channel, mentioned.has(uid) && uid !== m.sender ? 1 : 0);
    }
    return Number(await this.redis.call('FCALL', 'spike_message', keys.length, ...keys, ...args));
  }

  /**
   * The membership the conversation step writes (a small conversation-level function in the
   * design, reading the head atomically; here written directly: the spike measures messages).
   */
  async join(uid: string, conv: string, op: { gen: number; joinGen: number; joinHead: number; head: number; large: boolean; category: string }): Promise<void> {
    const k = userKeys(uid);
    await this.redis
      .multi()
      .hset(k.member, conv, memberValue(op.gen, op.joinGen, op.large, op.category))
      .zadd(k.read, 'GT', op.joinHead, conv)
      .zadd(k.last, 'GT', op.head, conv)
      .rpush(k.stream, conv)
      .exec();
  }

  async read(uid: string, conv: string, seq: number): Promise<void> {
    const k = userKeys(uid);
    await this.redis.call('FCALL', 'spike_raise', 2, k.read, k.stream, conv, seq, k.channel);
  }

  /** Mute or unmute, last writer wins by `clock` (a write clock, e.g. ms; below 2^52). */
  async mute(uid: string, conv: string, muted: boolean, clock: number): Promise<void> {
    const k = userKeys(uid);
    await this.redis.call('FCALL', 'spike_raise', 2, k.mute, k.stream, conv, clock * 2 + (muted ? 1 : 0), k.channel);
  }

  /** `GET /unread` from every register: one round trip for the user's registers, the rules run here. */
  async unread(uid: string): Promise<UnreadSummary> {
    const { registers, version } = await this.registers(uid);
    // Read-diffused groups would add their heads here (read at fold time, as today): the spike's are all write-diffused.
    return foldUnread(uid, version, registers, {});
  }

  /** The conversations changed after `cursor` (a version), with their states as the fold sees them. */
  async pull(uid: string, cursor: number, limit: number): Promise<SpikePull> {
    const k = userKeys(uid);
    const keys = [...foldKeys(k), k.stream];
    const [version, next, ...changed] = (await this.redis.call('FCALL_RO', 'spike_pull', keys.length, ...keys, cursor, limit)) as [
      number,
      number,
      ...unknown[],
    ];
    return { version, next, states: foldStates(overlayChanged(emptyRegisters(), changed)) };
  }

  /**
   * `GET /unread` from compaction's snapshot and what changed after it: one round trip, whose
   * Redis cost is one string and the stream's tail instead of every register.
   */
  async unreadFromSnapshot(uid: string): Promise<UnreadSummary> {
    const k = userKeys(uid);
    const keys = [...foldKeys(k), k.stream, k.snapshot];
    const [snapshot, version, ...changed] = (await this.redis.call('FCALL_RO', 'spike_unread', keys.length, ...keys)) as [string, number, ...unknown[]];
    return foldUnread(uid, version, overlayChanged(parseSnapshot(snapshot), changed), {});
  }

  /**
   * Compaction (off the hot path: a worker, when a user's stream has grown past its snapshot by
   * an interval): folds the registers and writes the snapshot at the stream position they were
   * read at, unless a newer snapshot is there. Returns whether it wrote. The stream is not
   * trimmed in the spike (that needs a base offset, as today's engine keeps).
   */
  async compact(uid: string): Promise<boolean> {
    const k = userKeys(uid);
    const { registers, version } = await this.registers(uid);
    return Number(await this.redis.call('FCALL', 'spike_snapshot', 1, k.snapshot, version, snapshotText(version, registers))) === 1;
  }

  private async registers(uid: string): Promise<{ registers: Registers; version: number }> {
    const k = userKeys(uid);
    const keys = [...foldKeys(k), k.stream];
    const [member, last, read, mute, mentions, version] = (await this.redis.call('FCALL_RO', 'spike_fold_read', keys.length, ...keys)) as [
      string[],
      string[],
      string[],
      string[],
      string[],
      number,
    ];
    return {
      registers: { member: pairs(member), last: scored(last), read: scored(read), mute: scored(mute), mentions: mentionsByConv(pairs(mentions)) },
      version,
    };
  }
}

/** A reply of HGETALL (field, value, …) as a map. */
function pairs(reply: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i + 1 < reply.length; i += 2) out.set(reply[i] as string, reply[i + 1] as string);
  return out;
}
