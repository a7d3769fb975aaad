import { Redis } from 'ioredis';
import { nanoid } from 'nanoid';
import type { Bus } from './bus.js';

const ORIGIN_BYTES = 10;

/**
 * Cross-process bus on Redis pub/sub. Each payload is prefixed with the publishing process's id
 * so a process ignores its own echo (it already delivered locally, without a round trip).
 * Channel names carry the same hash tags as the data keys, so moving to sharded pub/sub
 * (SPUBLISH/SSUBSCRIBE) on Redis Cluster keeps each channel on the shard of its user.
 */
export class RedisBus implements Bus {
  private readonly origin = Buffer.from(nanoid(ORIGIN_BYTES));
  private readonly pub: Redis;
  private readonly sub: Redis;
  private readonly local = new Set<string>();
  private handler: ((channel: string, payload: Uint8Array) => void) | undefined;

  constructor(url: string, private readonly prefix = 'rp:bus:') {
    this.pub = new Redis(url, { enableAutoPipelining: true, lazyConnect: false });
    this.sub = new Redis(url, { lazyConnect: false });
    this.sub.on('messageBuffer', (channel: Buffer, message: Buffer) => {
      if (message.subarray(0, ORIGIN_BYTES).equals(this.origin)) return;
      const name = channel.toString().slice(this.prefix.length);
      if (this.local.has(name)) this.handler?.(name, message.subarray(ORIGIN_BYTES));
    });
  }

  publish(channel: string, payload: Uint8Array): void {
    if (this.local.has(channel)) this.handler?.(channel, payload);
    const framed = Buffer.concat([this.origin, payload]);
    this.pub.publish(this.prefix + channel, framed).catch(() => {
      // Lost cross-process notifications are repaired by pulls (gaps, safety-net version frames).
    });
  }

  private readonly pending = new Map<string, Promise<void>>();

  subscribe(channel: string): Promise<void> {
    const inFlight = this.pending.get(channel);
    if (inFlight) return inFlight;
    if (this.local.has(channel)) return Promise.resolve();
    this.local.add(channel);
    const done = this.sub
      .subscribe(this.prefix + channel)
      .then(
        () => undefined,
        () => {
          // Pushes on this channel are lost until the next subscribe; pulls still repair.
          this.local.delete(channel);
        },
      )
      .finally(() => this.pending.delete(channel));
    this.pending.set(channel, done);
    return done;
  }

  unsubscribe(channel: string): void {
    if (!this.local.delete(channel)) return;
    this.sub.unsubscribe(this.prefix + channel).catch(() => undefined);
  }

  onMessage(handler: (channel: string, payload: Uint8Array) => void): void {
    this.handler = handler;
  }

  /** Resolves once pending SUBSCRIBEs are acknowledged (tests wait on it instead of sleeping). */
  async settled(): Promise<void> {
    await this.sub.ping().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.local.clear();
    await Promise.allSettled([this.pub.quit(), this.sub.quit()]);
  }
}
