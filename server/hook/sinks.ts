import { connect, type JetStreamClient, type NatsConnection, StringCodec } from 'nats';
import type { BadgeEvent } from './badge-event.js';
import { IDEMPOTENCY_HEADER, SIGNATURE_HEADER, signBody, TIMESTAMP_HEADER } from './signature.js';

/** Where badge events go: resolves once the event is accepted, rejects (to be retried) otherwise. */
export interface BadgeSink {
  readonly name: 'webhook' | 'nats';
  deliver(event: BadgeEvent): Promise<void>;
  close(): Promise<void>;
}

/**
 * The signed webhook: POST of the event's JSON; accepted on any 2xx. The timestamp is taken at
 * each attempt (a retry is signed again, so a retry late in the schedule is not refused as a
 * replay); the idempotency key stays the event's.
 */
export class WebhookSink implements BadgeSink {
  readonly name = 'webhook' as const;
  constructor(private readonly options: { url: string; secret: string; timeoutMs: number }) {}

  async deliver(event: BadgeEvent): Promise<void> {
    const body = JSON.stringify(event);
    const timestamp = Math.floor(Date.now() / 1000);
    const res = await fetch(this.options.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        [TIMESTAMP_HEADER]: String(timestamp),
        [SIGNATURE_HEADER]: signBody(this.options.secret, timestamp, body),
        [IDEMPOTENCY_HEADER]: event.key,
      },
      body,
      signal: AbortSignal.timeout(this.options.timeoutMs),
    });
    // The body is read (and dropped) so the connection goes back to the pool.
    await res.arrayBuffer();
    if (res.status < 200 || res.status > 299) throw new Error(`badge webhook answered ${res.status}`);
  }

  async close(): Promise<void> {}
}

/**
 * NATS: `<subject>.<uid>`. When a JetStream stream captures the subject (checked at start), a
 * JetStream publish, acknowledged by the stream and de-duplicated by it on the event's key
 * (`Nats-Msg-Id`); otherwise a core publish, accepted once flushed to the server (core NATS keeps
 * nothing for a subscriber that is not there).
 */
export class NatsSink implements BadgeSink {
  readonly name = 'nats' as const;
  private readonly codec = StringCodec();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
    private readonly js: JetStreamClient | undefined,
  ) {}

  static async open(url: string, subject: string): Promise<NatsSink> {
    const nc = await connect({ servers: url, name: 'redpoint-badge-hook', maxReconnectAttempts: -1, reconnectTimeWait: 250, timeout: 5_000 });
    let js: JetStreamClient | undefined;
    try {
      const jsm = await nc.jetstreamManager();
      const stream = await jsm.streams.find(`${subject}.x`);
      if (stream) js = nc.jetstream();
    } catch (err) {
      // No JetStream on the server, or no stream captures the subject: core publish.
      if (!(err instanceof Error)) throw err;
    }
    return new NatsSink(nc, subject, js);
  }

  /** 'jetstream' or 'core': which publish this sink makes (logged at start). */
  get mode(): 'jetstream' | 'core' {
    return this.js ? 'jetstream' : 'core';
  }

  async deliver(event: BadgeEvent): Promise<void> {
    const subject = `${this.subject}.${event.uid}`;
    const data = this.codec.encode(JSON.stringify(event));
    if (this.js) {
      await this.js.publish(subject, data, { msgID: event.key });
      return;
    }
    this.nc.publish(subject, data);
    await this.nc.flush();
  }

  async close(): Promise<void> {
    await this.nc.drain();
  }
}
