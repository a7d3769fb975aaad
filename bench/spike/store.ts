import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type { ConvState, UnreadSummary } from '../../protocol/types.js';
import { toConvState } from '../../server/engine/rules.js';
import { foldUnread, memberValue, mentionsByConv, recordOf, scored } from './fold.js';
import { foldKeys, HEADS_KEY, mentionMember, userKeys } from './keys.js';

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
    args.push(mentionMember(m.conv, m.seq));
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

  /** `GET /unread`: one round trip for the user's registers, the rules run here. */
  async unread(uid: string): Promise<UnreadSummary> {
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
    const registers = { member: pairs(member), last: scored(last), read: scored(read), mute: scored(mute), mentions: mentionsByConv(mentions) };
    // Read-diffused groups would add their heads here (read at fold time, as today): the spike's are all write-diffused.
    return foldUnread(uid, version, registers, {});
  }

  /** The conversations changed after `cursor` (a version), with their states as the fold sees them. */
  async pull(uid: string, cursor: number, limit: number): Promise<SpikePull> {
    const k = userKeys(uid);
    const keys = [...foldKeys(k), k.stream];
    const reply = (await this.redis.call('FCALL_RO', 'spike_pull', keys.length, ...keys, cursor, limit)) as unknown[];
    const states: ConvState[] = [];
    for (let i = 2; i + 5 < reply.length; i += 6) {
      const conv = reply[i] as string;
      const member = reply[i + 1] as string;
      if (member === '') continue;
      const mentions = mentionsByConv(reply[i + 5] as string[]);
      states.push(
        toConvState(
          recordOf(conv, member, {
            last: new Map([[conv, Number(reply[i + 2])]]),
            read: new Map([[conv, Number(reply[i + 3])]]),
            mute: new Map([[conv, Number(reply[i + 4])]]),
            mentions,
          }),
        ),
      );
    }
    return { version: Number(reply[0]), next: Number(reply[1]), states };
  }
}

/** A reply of HGETALL (field, value, …) as a map. */
function pairs(reply: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i + 1 < reply.length; i += 2) out.set(reply[i] as string, reply[i + 1] as string);
  return out;
}
