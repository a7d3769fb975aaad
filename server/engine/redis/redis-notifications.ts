import { quitWithin, type RedisTarget } from '../../redis-target.js';
import { type HeadChange, InterestCounter, type NotificationHandler, type Notifications, type UserChange } from '../notifications.js';
import { decodeEntryText } from '../state-text.js';
import type { StoreHealth } from '../store-health.js';
import { clientAddress, clusterClient, singleClient } from './clients.js';
import { convChannel, userChannel } from './keys.js';
import { decodeReadsMessage } from './redis-read-positions.js';
import { watchCluster, watchRedis } from './watch-redis.js';

/** How the engine's scripts publish: classic pub/sub on one Redis (or behind Sentinel), sharded pub/sub on a cluster. */
export function publishCommand(target: RedisTarget): 'PUBLISH' | 'SPUBLISH' {
  return target.cluster === undefined ? 'PUBLISH' : 'SPUBLISH';
}

/** The subscribing half of a transport (the scripts publish; see user_apply.lua and conv_record.lua). */
interface Subscriber {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  close(): Promise<void>;
}

type Receive = (channel: string, message: string) => void;

/** Where the subscriber reports its connections' state, and how long a call may take. */
export interface SubscriberOptions {
  health: StoreHealth;
  storeTimeoutMs: number;
}

/**
 * One Redis, or the master the Sentinels name: the scripts publish on the master, so the
 * subscriber follows it across a failover like the engine does (clients.ts), and ioredis
 * subscribes its channels again on the new connection.
 */
function singleSubscriber(target: RedisTarget & { cluster?: undefined }, receive: Receive, { health, storeTimeoutMs }: SubscriberOptions): Subscriber {
  const sub = singleClient(target, { storeTimeoutMs, extra: { lazyConnect: false } });
  // Lost notifications are repaired by pulls; StoreHealth reports the connection's state (and its
  // 'error' listener keeps ioredis from printing every failed reconnect).
  sub.on('error', () => undefined);
  watchRedis(health, `bus-subscribe@${clientAddress(target, sub)}`, sub);
  sub.on('message', receive);
  return {
    subscribe: (channel) => sub.subscribe(channel),
    unsubscribe: (channel) => sub.unsubscribe(channel),
    close: () => quitWithin(sub, storeTimeoutMs),
  };
}

/**
 * Sharded pub/sub (Redis 7): a user's changes are SPUBLISHed by the script on the master that
 * holds the user's keys, and only that master's subscribers hear them. ioredis's Cluster with
 * `shardedSubscribers` keeps one subscriber connection per master, sends each SSUBSCRIBE to the
 * master of its slot and subscribes again after a failover, restart or resharding.
 */
function clusterSubscriber(
  target: RedisTarget & { cluster: RedisTarget['cluster'] & object },
  receive: Receive,
  { health, storeTimeoutMs }: SubscriberOptions,
): Subscriber {
  const cluster = clusterClient(target, { storeTimeoutMs }, { shardedSubscribers: true, lazyConnect: false });
  // An unheard 'error' event of a Cluster throws.
  cluster.on('error', () => undefined);
  watchCluster(health, 'bus', cluster);
  cluster.on('smessage', receive);
  return {
    subscribe: (channel) => cluster.ssubscribe(channel),
    unsubscribe: (channel) => cluster.sunsubscribe(channel),
    close: () => quitWithin(cluster, storeTimeoutMs),
  };
}

/**
 * The Redis engine's change feed. Channels are subscribed only while a local socket needs them
 * (a user online here, a large group with members online here), so a process hears only what it
 * serves. Because the scripts publish inside the step that made a change, the messages of one
 * user's channel arrive in version order, from every process.
 */
export class RedisNotifications implements Notifications {
  private readonly subscriber: Subscriber;
  private readonly users = new InterestCounter();
  private readonly convs = new InterestCounter();
  /** SUBSCRIBEs not yet acknowledged, so concurrent followers wait on the same one. */
  private readonly pending = new Map<string, Promise<void>>();
  private handler: NotificationHandler | undefined;
  private readonly channelPrefix: string;

  constructor(
    target: RedisTarget,
    private readonly prefix: string,
    private readonly options: SubscriberOptions,
  ) {
    this.channelPrefix = `${prefix}:bus:`;
    const receive: Receive = (channel, message) => this.receive(channel, message);
    this.subscriber = target.cluster === undefined ? singleSubscriber(target, receive, options) : clusterSubscriber(target, receive, options);
  }

  followUser(uid: string): Promise<void> {
    return this.users.add(uid) ? this.subscribe(userChannel(this.prefix, uid)) : (this.pending.get(userChannel(this.prefix, uid)) ?? Promise.resolve());
  }

  unfollowUser(uid: string): void {
    if (this.users.remove(uid)) this.unsubscribe(userChannel(this.prefix, uid));
  }

  followConversation(conv: string): Promise<void> {
    return this.convs.add(conv) ? this.subscribe(convChannel(this.prefix, conv)) : (this.pending.get(convChannel(this.prefix, conv)) ?? Promise.resolve());
  }

  unfollowConversation(conv: string): void {
    if (this.convs.remove(conv)) this.unsubscribe(convChannel(this.prefix, conv));
  }

  setHandler(handler: NotificationHandler): void {
    this.handler = handler;
  }

  /** Resolves once pending subscribes are acknowledged (tests wait on it instead of sleeping). */
  async settled(): Promise<void> {
    await Promise.all([...this.pending.values()]);
  }

  async close(): Promise<void> {
    this.users.clear();
    this.convs.clear();
    await this.subscriber.close();
  }

  private subscribe(channel: string): Promise<void> {
    const done = this.subscriber
      .subscribe(channel)
      .then(
        () => undefined,
        // Pushes on this channel are lost until the next follow; pulls still repair.
        () => this.options.health.busFailed('subscribe'),
      )
      .finally(() => {
        if (this.pending.get(channel) === done) this.pending.delete(channel);
      });
    this.pending.set(channel, done);
    return done;
  }

  private unsubscribe(channel: string): void {
    this.subscriber.unsubscribe(channel).catch(() => undefined);
  }

  private receive(channel: string, message: string): void {
    if (!channel.startsWith(this.channelPrefix)) return;
    // `{u:<uid>}` or `{c:<conv>}`, read in place: one slice (the id) per message.
    const at = this.channelPrefix.length;
    if (channel.charCodeAt(at) !== OPEN_BRACE || channel.charCodeAt(at + 2) !== COLON) return;
    const kind = channel.charCodeAt(at + 1);
    const id = channel.slice(at + 3, -1);
    try {
      if (kind === LETTER_U && this.users.has(id)) {
        if (message.charCodeAt(0) === BANG) this.handler?.readsChanged?.(decodeReadsMessage(id, message));
        else this.handler?.userChanged(parseUserMessage(id, message));
      } else if (kind === LETTER_C && this.convs.has(id)) this.handler?.headChanged(parseHeadMessage(id, message));
    } catch {
      // Not one of ours (the prefix is shared with nothing else): never crash on input.
    }
  }
}

const OPEN_BRACE = 0x7b;
const COLON = 0x3a;
const LETTER_U = 0x75;
const LETTER_C = 0x63;
/** A read receipts message (redis-read-positions.ts) on a user's channel. */
const BANG = 0x21;

/** `epoch|at` then one `v|state` line per change (user_apply.lua). */
function parseUserMessage(uid: string, message: string): UserChange[] {
  // Walked by index (every push of every online user comes through here): no array of lines,
  // and `at` set on the change rather than spread from an object made for it.
  let nl = message.indexOf('\n');
  const head = nl < 0 ? message : message.slice(0, nl);
  const bar = head.indexOf('|');
  const epoch = head.slice(0, bar);
  const atText = head.slice(bar + 1);
  const at = atText === '' ? undefined : Number(atText);
  const out: UserChange[] = [];
  while (nl >= 0) {
    const start = nl + 1;
    nl = message.indexOf('\n', start);
    const line = nl < 0 ? message.slice(start) : message.slice(start, nl);
    const sep = line.indexOf('|');
    const { conv, state } = decodeEntryText(line.slice(sep + 1));
    const change: UserChange = { uid, conv, epoch, version: Number(line.slice(0, sep)), state };
    if (at !== undefined) change.at = at;
    out.push(change);
  }
  return out;
}

/**
 * `maxSeq|arrival|headAt|@all seqs|non-counting seqs` (conv_record.lua; seqs 'a,b'; '' = none),
 * or `maxSeq|arrival` when the messages carry none of the last three (most; and every message
 * of a process of the release before, in a rolling upgrade).
 */
function parseHeadMessage(conv: string, message: string): HeadChange {
  const [maxSeq = '', arrival = '', headAt = '', all = '', nocount = ''] = message.split('|');
  return {
    conv,
    maxSeq: Number(maxSeq),
    ...(arrival !== '' ? { at: Number(arrival) } : {}),
    ...(headAt !== '' ? { headAt: Number(headAt) } : {}),
    ...(all !== '' ? { mentionAll: all.split(',').map(Number) } : {}),
    ...(nocount !== '' ? { nocount: nocount.split(',').map(Number) } : {}),
  };
}
