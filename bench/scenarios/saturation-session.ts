import type { Redis } from 'ioredis';
import type { PushClient } from '../clients/types.js';
import { Deliveries } from '../lib/deliveries.js';
import { eachLimited, type HttpTarget } from '../lib/http.js';
import { CpuWindow } from '../lib/proc.js';
import { redisStats, statsConnection, statsDelta } from '../lib/redis-info.js';
import type { RunningSystem } from '../systems.js';
import { connectAll, createDirectConversations, directConv, senderId, userId } from './setup.js';

/** Who receives what: the clients to connect, and for message i its conversation, sender and online recipients. */
export interface Audience {
  clientUids: string[];
  message(i: number): { conv: string; sender: string; recipients: number };
}

/** `n` 1:1 conversations, each between an online client and an offline sender. */
export async function directAudience(http: HttpTarget, tag: string, n: number): Promise<Audience> {
  await createDirectConversations(http, tag, n);
  return {
    clientUids: Array.from({ length: n }, (_, i) => userId(tag, i)),
    message: (i) => ({ conv: directConv(tag, i % n), sender: senderId(tag, i % n), recipients: 1 }),
  };
}

/**
 * `groups` groups of `members` members: an offline sender and `members - 1` online clients each.
 * Above the large-group threshold a group is read-diffused. Messages go round-robin over groups.
 */
export async function groupAudience(http: HttpTarget, tag: string, groups: number, members: number): Promise<Audience> {
  const uidsOf = (g: number): string[] => Array.from({ length: members - 1 }, (_, i) => `${tag}-g${g}u${i}`);
  await eachLimited(
    Array.from({ length: groups }, (_, g) => g),
    4,
    async (g) => {
      await http.expectOk('PUT', `/v1/conversations/${tag}-g${g}/members`, { add: [`${tag}-s${g}`, ...uidsOf(g)] });
    },
  );
  return {
    clientUids: Array.from({ length: groups }, (_, g) => uidsOf(g)).flat(),
    message: (i) => ({ conv: `${tag}-g${i % groups}`, sender: `${tag}-s${i % groups}`, recipients: members - 1 }),
  };
}

export interface SaturationResult {
  system: string;
  seconds: number;
  messagesPerSec: number;
  deliveriesPerSec: number;
  framesPerSec: number;
  serverCpuUsPerDelivery: number;
  /** The redis-server's CPU per delivery (systems on Redis). */
  redisCpuUsPerDelivery: number;
  /** The server's cores used over the measured windows. */
  serverCores: number;
  /** Redis commands per message over the measured windows (systems on Redis), most time first. */
  redisCommands: Array<{ command: string; callsPerMessage: number; usPerMessage: number }>;
  lost: number;
  postErrors: number;
  clientErrors: number;
}

const LOST_AFTER_MS = 3000;

export interface SaturationLoad {
  /** Messages sent and not yet delivered to all their recipients, at most. */
  inFlight: number;
  /** Messages per POST. */
  batch: number;
}

/**
 * One system's side of a saturation scenario: the audience connected, messages POSTed closed-loop
 * with at most `load.inFlight` not yet delivered to all their recipients — so the rate is what
 * server and clients can deliver, not what the POST path takes. Measured windows add up, so they can be
 * interleaved with other systems'.
 */
export class SaturationSession {
  private readonly seqs = new Map<string, number>();
  private sent = 0;
  private t = { seconds: 0, messages: 0, delivered: 0, frames: 0, cpuMicros: 0, redisCpuSeconds: 0, postErrors: 0, lostBefore: 0 };
  /** cmdstat calls and µs over the measured windows, by command. */
  private readonly commands = new Map<string, { calls: number; usec: number }>();

  private constructor(
    readonly system: RunningSystem,
    private readonly audience: Audience,
    private readonly deliveries: Deliveries,
    private readonly clients: PushClient[],
    private readonly load: SaturationLoad,
    private readonly redis: Redis | undefined,
  ) {}

  static async open(system: RunningSystem, makeAudience: (http: HttpTarget) => Promise<Audience>, load: SaturationLoad): Promise<SaturationSession> {
    const audience = await makeAudience(system.http);
    const deliveries = new Deliveries();
    const clients = await connectAll(system, audience.clientUids, () => deliveries.receiver());
    return new SaturationSession(system, audience, deliveries, clients, load, system.redisUrl ? statsConnection(system.redisUrl) : undefined);
  }

  /** Drives for `seconds`; a measured window adds to the result. */
  async drive(seconds: number, measured: boolean): Promise<void> {
    const d = this.deliveries;
    const cpu = new CpuWindow(this.system.pid).start();
    const redisBefore = measured && this.redis ? await redisStats(this.redis) : undefined;
    const before = { delivered: d.delivered, frames: d.frames, messages: this.sent };
    const started = performance.now();
    const end = started + seconds * 1000;
    let lastExpire = started;
    while (performance.now() < end) {
      while (d.inFlight + this.load.batch <= this.load.inFlight) this.sendBatch();
      await d.next(5);
      if (performance.now() - lastExpire > 250) {
        d.expire(LOST_AFTER_MS);
        lastExpire = performance.now();
      }
    }
    if (!measured) return;
    const used = cpu.stop();
    this.t.seconds += (performance.now() - started) / 1000;
    this.t.messages += this.sent - before.messages;
    this.t.delivered += d.delivered - before.delivered;
    this.t.frames += d.frames - before.frames;
    this.t.cpuMicros += used.cpuMicros;
    if (this.redis && redisBefore) {
      const after = await redisStats(this.redis);
      this.t.redisCpuSeconds += after.cpuSeconds - redisBefore.cpuSeconds;
      const delta = statsDelta(redisBefore, after);
      for (const name of after.commands.keys()) {
        // The bench's own INFO calls are not the system's.
        if (name === 'info') continue;
        const d = delta.command(name);
        const sum = this.commands.get(name) ?? { calls: 0, usec: 0 };
        this.commands.set(name, { calls: sum.calls + d.calls, usec: sum.usec + d.usec });
      }
    }
  }

  result(): SaturationResult {
    const t = this.t;
    const per = (us: number): number => us / Math.max(1, t.delivered);
    return {
      system: this.system.spec.id,
      seconds: t.seconds,
      messagesPerSec: t.messages / Math.max(1e-3, t.seconds),
      deliveriesPerSec: t.delivered / Math.max(1e-3, t.seconds),
      framesPerSec: t.frames / Math.max(1e-3, t.seconds),
      serverCpuUsPerDelivery: per(t.cpuMicros),
      redisCpuUsPerDelivery: this.redis ? per(t.redisCpuSeconds * 1e6) : NaN,
      serverCores: t.cpuMicros / 1e6 / Math.max(1e-3, t.seconds),
      redisCommands: [...this.commands]
        .filter(([, c]) => c.calls > 0)
        .map(([command, c]) => ({ command, callsPerMessage: c.calls / Math.max(1, t.messages), usPerMessage: c.usec / Math.max(1, t.messages) }))
        .sort((a, b) => b.usPerMessage - a.usPerMessage),
      lost: this.deliveries.lost,
      postErrors: t.postErrors,
      clientErrors: this.clients.reduce((n, c) => n + c.errors, 0),
    };
  }

  close(): void {
    for (const c of this.clients) c.close();
    this.redis?.disconnect();
  }

  private sendBatch(): void {
    const messages: Array<{ conv: string; seq: number; sender: string }> = [];
    for (let k = 0; k < this.load.batch; k++) {
      const m = this.audience.message(this.sent++);
      const seq = (this.seqs.get(m.conv) ?? 0) + 1;
      this.seqs.set(m.conv, seq);
      this.deliveries.expect(m.conv, seq, m.recipients);
      messages.push({ conv: m.conv, seq, sender: m.sender });
    }
    const failed = (): void => {
      this.t.postErrors += 1;
      for (const m of messages) this.deliveries.abandon(m.conv, m.seq);
    };
    const body = messages.length === 1 ? messages[0] : { messages };
    this.system.http.send('POST', '/v1/messages', body).then((reply) => {
      if (reply.status !== 200) failed();
    }, failed);
  }
}
