import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  type ConsumerMessages,
  connect,
  DeliverPolicy,
  headers,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type NatsConnection,
  nanos,
  RetentionPolicy,
  StorageType,
} from 'nats';
import type { Logger } from 'pino';
import type { Outcome } from './outcome.js';
import { parseRecordBytes } from './record.js';
import type { DeliveryBatch, QueueSource } from './source.js';

export interface JetStreamOptions {
  url: string;
  stream: string;
  subject: string;
  /** Records per batch: also the client's prefetch, so at most two batches' worth are in memory. */
  batch: number;
}

/** The durable consumer every Redpoint process shares: each record goes to one of them. */
const DURABLE_NAME = 'redpoint';
/** Unacknowledged this long, a record is redelivered (to any process); a held batch is kept alive sooner. */
const ACK_WAIT_MS = 10_000;
/**
 * Lifetime of one pull request at the server. Closing the client's pull does not cancel the
 * request the server holds: a record nak'ed before it expires is delivered into it, unread, and
 * waits out the ack wait. Shutdown waits this long (plus a margin) before it gives records back.
 */
const PULL_EXPIRES_MS = 1_000;

/** The dead-letter stream and subject of an ingest stream and subject. */
function deadLetterOf(stream: string, subject: string): { stream: string; subject: string } {
  return { stream: `${stream}_DEAD`, subject: `${subject}.dead` };
}

/**
 * NATS JetStream: a work-queue stream on INGEST_NATS_SUBJECT and one durable pull consumer shared
 * by every process (created when missing). A record is acked once the store applied it, nak'ed
 * with its backoff delay for a retry, and for the dead letter published to `<subject>.dead`
 * (stream `<stream>_DEAD`, the reason in the `Redpoint-Dead-Reason` header) before it is
 * acked. A process that dies leaves its records unacked: JetStream redelivers them after the
 * ack wait.
 */
export class JetStreamSource implements QueueSource {
  readonly name = 'jetstream';
  private nc: NatsConnection | undefined;
  private js: JetStreamClient | undefined;
  private jsm: JetStreamManager | undefined;
  private messages: ConsumerMessages | undefined;
  private readonly buffer: JsMsg[] = [];
  private arrived: (() => void) | undefined;
  private room: (() => void) | undefined;
  private pumping: Promise<void> | undefined;

  constructor(
    private readonly options: JetStreamOptions,
    private readonly log: Logger,
  ) {}

  async open(): Promise<void> {
    const { url, stream, subject } = this.options;
    const nc = await connect({ servers: url, name: 'redpoint-ingest', maxReconnectAttempts: -1, reconnectTimeWait: 250, timeout: 5_000 });
    this.nc = nc;
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect' || s.type === 'reconnect')
          this.log.warn({ event: `ingest_nats_${s.type}`, data: String(s.data) }, `jetstream: ${s.type} (${String(s.data)})`);
      }
    })();
    const jsm = await nc.jetstreamManager();
    this.jsm = jsm;
    const dead = deadLetterOf(stream, subject);
    await ensureStream(jsm, stream, [subject], RetentionPolicy.Workqueue);
    await ensureStream(jsm, dead.stream, [dead.subject], RetentionPolicy.Limits);
    await jsm.consumers.add(stream, {
      durable_name: DURABLE_NAME,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: subject,
      ack_wait: nanos(ACK_WAIT_MS),
      max_ack_pending: 20_000,
    });
    this.js = nc.jetstream();
    const consumer = await this.js.consumers.get(stream, DURABLE_NAME);
    this.messages = await consumer.consume({ max_messages: this.options.batch, expires: PULL_EXPIRES_MS });
    this.pumping = this.pump(this.messages);
  }

  async next(max: number, signal: AbortSignal): Promise<DeliveryBatch | null> {
    while (this.buffer.length === 0) {
      if (signal.aborted || !this.messages) return null;
      await new Promise<void>((resolve) => {
        const done = (): void => {
          signal.removeEventListener('abort', done);
          this.arrived = undefined;
          resolve();
        };
        signal.addEventListener('abort', done, { once: true });
        this.arrived = done;
      });
    }
    const taken = this.buffer.splice(0, max);
    this.room?.();
    return this.batchOf(taken);
  }

  async backlog(): Promise<{ waiting: number; oldestSeconds: number }> {
    const jsm = this.jsm;
    if (!jsm) return { waiting: 0, oldestSeconds: 0 };
    const info = await jsm.consumers.info(this.options.stream, DURABLE_NAME);
    const waiting = info.num_pending + info.num_ack_pending;
    if (waiting === 0) return { waiting, oldestSeconds: 0 };
    const oldest = await jsm.streams.getMessage(this.options.stream, { seq: info.ack_floor.stream_seq + 1 }).catch(() => undefined);
    return { waiting, oldestSeconds: oldest ? Math.max(0, (Date.now() - oldest.time.getTime()) / 1000) : 0 };
  }

  async close(): Promise<void> {
    await this.stopPulling();
    await this.nc?.drain().catch(() => undefined);
  }

  /**
   * Ends the client's pull and gives back what it prefetched, once the server's last pull request
   * has expired (see PULL_EXPIRES_MS): a record nak'ed before would be delivered into it.
   */
  private async stopPulling(): Promise<void> {
    const messages = this.messages;
    this.messages = undefined;
    this.arrived?.();
    this.room?.();
    await messages?.close().catch(() => undefined);
    await this.pumping;
    if (messages) await sleep(PULL_EXPIRES_MS + 250);
    for (const m of this.buffer.splice(0)) m.nak();
  }

  /** The client's prefetch into a buffer of at most one batch: it stops taking while the consumer is busy. */
  private async pump(messages: ConsumerMessages): Promise<void> {
    for await (const m of messages) {
      this.buffer.push(m);
      this.arrived?.();
      if (this.buffer.length >= this.options.batch) await new Promise<void>((resolve) => (this.room = resolve));
      this.room = undefined;
      if (this.messages !== messages) break;
    }
  }

  private batchOf(taken: JsMsg[]): DeliveryBatch {
    const dead = deadLetterOf(this.options.stream, this.options.subject);
    return {
      deliveries: taken.map((m) => ({ id: String(m.seq), attempts: Math.max(0, m.info.deliveryCount - 1), body: () => parseRecordBytes(m.data) })),
      keepAlive: async () => {
        for (const m of taken) m.working();
      },
      settle: async (outcomes: readonly Outcome[]) => {
        const js = this.js;
        await Promise.all(
          outcomes.map(async (o, i) => {
            const m = taken[i];
            if (!m) return;
            if (o.kind === 'applied') m.ack();
            else if (o.kind === 'retry') m.nak(o.delayMs);
            else {
              const h = headers();
              h.set('Redpoint-Dead-Reason', o.reason.replace(/[\r\n]+/g, ' ').slice(0, 1024));
              h.set('Redpoint-Stream-Seq', String(m.seq));
              h.set('Redpoint-Subject', m.subject);
              try {
                // msgID: a redelivered record dead-lettered twice is stored once.
                await js?.publish(dead.subject, m.data, { headers: h, msgID: `${this.options.stream}:${m.seq}` });
                // Acked, not terminated: nats-server 2.9 keeps a terminated record of a work-queue
                // stream pending for ever. It is in the dead letter now; acking it is what we mean.
                m.ack();
              } catch (err) {
                // Not in the dead letter yet: it comes back and is dead-lettered then.
                m.nak(1_000);
                throw err;
              }
            }
          }),
        );
      },
      // Only at shutdown: the pull stops first (see stopPulling), then every record is given back.
      release: async () => {
        await this.stopPulling();
        for (const m of taken) m.nak();
        await this.nc?.flush().catch(() => undefined);
      },
    };
  }
}

async function ensureStream(jsm: JetStreamManager, name: string, subjects: string[], retention: RetentionPolicy): Promise<void> {
  try {
    await jsm.streams.info(name);
  } catch (err) {
    if (!/not found/i.test((err as Error).message)) throw err;
    await jsm.streams.add({ name, subjects, retention, storage: StorageType.File });
  }
}
