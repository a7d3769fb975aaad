import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Value } from '@sinclair/typebox/value';
import { type BadgeEvent, BadgeEventSchema } from '../../server/hook/badge-event.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyBadgeRequest } from '../../server/hook/signature.js';

/** One request as it arrived: the raw body and the headers the check reads. */
export interface ReceivedRequest {
  body: string;
  signature: string | undefined;
  timestamp: string | undefined;
  idempotencyKey: string | undefined;
}

/**
 * A real push service's front door for the tests: a node:http server on a free port that checks
 * each request with the documented verification function and keeps the events it accepted.
 * `mode` switches it between accepting, answering 503 and answering after a delay.
 */
export class BadgeReceiver {
  readonly events: BadgeEvent[] = [];
  readonly requests: ReceivedRequest[] = [];
  /** Requests answered with anything but 2xx. */
  refused = 0;
  mode: 'ok' | 'unavailable' | { delayMs: number } = 'ok';
  /** Accepted events that do not match the documented schema (BadgeEventSchema). */
  invalid = 0;
  /** Requests that arrived for a user while another request for that user was still being answered. */
  overlaps = 0;
  private readonly open = new Map<string, number>();
  private server: Server | undefined;
  private port = 0;

  constructor(readonly secret: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/badge`;
  }

  async start(port = 0): Promise<void> {
    const server = createServer((req, res) => {
      void this.handle(req).then(
        (status) => res.writeHead(status).end(),
        () => res.writeHead(500).end(),
      );
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  /** Closes the port (connections are refused until start() on the same port). */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async restart(): Promise<void> {
    await this.start(this.port);
  }

  /** Requests being answered now (a delayed mode holds them). */
  hanging(): number {
    let n = 0;
    for (const open of this.open.values()) n += open;
    return n;
  }

  /** Events for `uid`, in arrival order. */
  of(uid: string): BadgeEvent[] {
    return this.events.filter((e) => e.uid === uid);
  }

  last(uid: string): BadgeEvent | undefined {
    return this.of(uid).at(-1);
  }

  /** The event a push service applies last: the highest seq (a late arrival of an older one is ignored, as PROTOCOL.md says). */
  latest(uid: string): BadgeEvent | undefined {
    return this.of(uid).reduce<BadgeEvent | undefined>((best, e) => (!best || e.seq > best.seq ? e : best), undefined);
  }

  private async handle(req: IncomingMessage): Promise<number> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const header = (name: string): string | undefined => {
      const v = req.headers[name];
      return Array.isArray(v) ? v[0] : v;
    };
    const request = { body, signature: header(SIGNATURE_HEADER), timestamp: header(TIMESTAMP_HEADER), idempotencyKey: header('idempotency-key') };
    this.requests.push(request);
    const mode = this.mode;
    if (mode === 'unavailable') {
      this.refused++;
      return 503;
    }
    if (verifyBadgeRequest(this.secret, request, body) !== 'ok') {
      this.refused++;
      return 401;
    }
    const event = JSON.parse(body) as BadgeEvent;
    if (!Value.Check(BadgeEventSchema, event)) this.invalid++;
    const open = this.open.get(event.uid) ?? 0;
    if (open > 0) this.overlaps++;
    this.open.set(event.uid, open + 1);
    try {
      if (typeof mode === 'object') await sleep(mode.delayMs);
    } finally {
      this.open.set(event.uid, (this.open.get(event.uid) ?? 1) - 1);
    }
    this.events.push(event);
    return 204;
  }
}
