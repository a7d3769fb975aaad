import type { Logger } from 'pino';
import { ERROR_CODES, RedpointError, type ErrorBody } from '../../protocol/errors.js';
import { decodeJson, decodeMsgpack, encodeMsgpack } from '../../protocol/codec.js';
import { LIMITS } from '../../protocol/limits.js';
import type { Metrics } from '../metrics/metrics.js';
import type { HttpRequest, HttpResponse, TemplatedApp } from './uws.js';

/** What a handler sees: everything copied out of uWS's stack-allocated request before any await. */
export interface RequestContext {
  method: string;
  url: string;
  params: string[];
  query: URLSearchParams;
  authorization: string;
  wantsMsgpack: boolean;
  /** The parsed body (JSON or MessagePack by Content-Type), or undefined when the route takes none. */
  body: unknown;
  /** What the route's `authorize` returned: the authenticated user id, or null for the API key. */
  subject: string | null;
  requestId: string;
}

export interface Reply {
  status?: number;
  body: unknown;
  /** Raw text reply (e.g. Prometheus exposition) instead of JSON/MessagePack. */
  text?: { contentType: string; content: string };
}

export type Handler = (ctx: RequestContext) => Promise<Reply>;

/** Checks credentials; returns the user id it authenticated (null: the message service's API key). */
export type Authorize = (ctx: RequestContext) => Promise<string | null> | string | null;

export interface RouteOptions {
  /** Read and parse a request body. */
  body?: boolean;
  /** Runs before the body is parsed, so an unauthenticated request costs no parsing. */
  authorize?: Authorize;
  /** Metric label; the pattern by default. */
  name?: string;
}

type Method = 'get' | 'post' | 'put' | 'del';

let requestCounter = 0;

/**
 * Registers routes on a uWS app with body limits, abort handling, corked writes, JSON or
 * MessagePack negotiation and one error format. Handlers never touch uWS objects.
 */
export class HttpRouter {
  private closing = false;

  constructor(
    private readonly app: TemplatedApp,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {}

  /** After this every request is answered 503 `unavailable` (graceful shutdown). */
  refuseNew(): void {
    this.closing = true;
  }

  route(method: Method, pattern: string, handler: Handler, options: RouteOptions = {}): void {
    const paramCount = (pattern.match(/\/:/g) ?? []).length;
    const name = options.name ?? pattern;
    this.app[method](pattern, (res, req) => this.handle(res, req, handler, paramCount, name, options));
  }

  /** Any method on a known path other than the registered ones → 405; unknown path → 404. */
  fallback(knownPatterns: readonly string[]): void {
    for (const pattern of knownPatterns) {
      this.app.any(pattern, (res, req) => this.sendError(res, req, new RedpointError('method_not_allowed', 'method not allowed')));
    }
    this.app.any('/*', (res, req) => this.sendError(res, req, new RedpointError('not_found', 'no such endpoint')));
  }

  private handle(res: HttpResponse, req: HttpRequest, handler: Handler, paramCount: number, name: string, options: RouteOptions): void {
    const started = performance.now();
    const params: string[] = [];
    for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i));
    const contentType = req.getHeader('content-type');
    const ctx = this.context(req, params);
    const state: AbortState = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
      state.onAbort?.();
    });
    if (this.closing) {
      state.bodyPending = options.body === true;
      this.finish(res, state, ctx, name, started, errorReply(new RedpointError('unavailable', 'server is shutting down')));
      return;
    }
    // uWS delivers body chunks only to a handler attached now; parsing waits for authorization.
    const body = options.body ? readBody(res, state) : undefined;
    body?.catch(() => undefined);
    const run = async (): Promise<void> => {
      let reply: Reply;
      try {
        if (options.authorize) ctx.subject = await options.authorize(ctx);
        if (body) ctx.body = parseBody(await body, contentType);
        reply = await handler(ctx);
      } catch (err) {
        reply = this.toErrorReply(err, ctx);
      }
      this.finish(res, state, ctx, name, started, reply);
    };
    void run();
  }

  private context(req: HttpRequest, params: string[]): RequestContext {
    return {
      method: req.getMethod(),
      url: req.getUrl(),
      params,
      query: new URLSearchParams(req.getQuery()),
      authorization: req.getHeader('authorization'),
      wantsMsgpack: req.getHeader('accept').includes('application/msgpack'),
      body: undefined,
      subject: null,
      requestId: req.getHeader('x-request-id') || `r${(++requestCounter).toString(36)}`,
    };
  }

  private finish(res: HttpResponse, state: AbortState, ctx: RequestContext, name: string, started: number, reply: Reply): void {
    const status = reply.status ?? 200;
    this.log.debug({ requestId: ctx.requestId, method: ctx.method, url: ctx.url, status, ms: performance.now() - started }, 'request');
    this.metrics.httpRequests.inc({ route: name, status: String(status) });
    this.metrics.httpDuration.observe({ route: name }, (performance.now() - started) / 1000);
    if (state.aborted) return;
    let contentType: string;
    let payload: string | Uint8Array;
    if (reply.text) {
      contentType = reply.text.contentType;
      payload = reply.text.content;
    } else if (ctx.wantsMsgpack) {
      contentType = 'application/msgpack';
      payload = encodeMsgpack(reply.body);
    } else {
      contentType = 'application/json';
      payload = JSON.stringify(reply.body);
    }
    res.cork(() => {
      res.writeStatus(statusLine(status)).writeHeader('content-type', contentType).writeHeader('x-request-id', ctx.requestId);
      // A body may still be streaming in (oversize, or refused before it was read): close rather
      // than read the rest.
      res.end(payload, state.bodyPending === true);
    });
  }

  private toErrorReply(err: unknown, ctx: RequestContext): Reply {
    const reply = errorReply(err);
    const code = (reply.body as ErrorBody).error.code;
    this.metrics.errors.inc({ code });
    if (code === 'internal' || code === 'unavailable') this.log.error({ err, requestId: ctx.requestId, url: ctx.url }, 'request failed');
    return reply;
  }

  /** Answers at once (404/405), in the format the client asked for. */
  private sendError(res: HttpResponse, req: HttpRequest, err: RedpointError): void {
    const ctx = this.context(req, []);
    this.finish(res, { aborted: false }, ctx, 'fallback', performance.now(), this.toErrorReply(err, ctx));
  }

}

function errorReply(err: unknown): Reply {
  const e =
    err instanceof RedpointError
      ? err
      : isConnectionError(err)
        ? new RedpointError('unavailable', 'store unavailable, retry')
        : new RedpointError('internal', 'internal error');
  const body: ErrorBody = { error: { code: e.code, message: e.message } };
  return { status: ERROR_CODES[e.code].status, body };
}

function isConnectionError(err: unknown): boolean {
  const message = err instanceof Error ? err.message : '';
  return /Connection is closed|ECONNREFUSED|ECONNRESET|max retries|Stream isn't writeable|LOADING/i.test(message);
}

interface AbortState {
  aborted: boolean;
  /** The request body has not been read to its end. */
  bodyPending?: boolean;
  /** Settles a pending body read when the client goes away mid-upload. */
  onAbort?: () => void;
}

function readBody(res: HttpResponse, state: AbortState): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    state.bodyPending = true;
    res.onData((chunk, isLast) => {
      if (done) return;
      size += chunk.byteLength;
      if (size > LIMITS.maxBodyBytes) {
        done = true;
        reject(new RedpointError('payload_too_large', `body exceeds ${LIMITS.maxBodyBytes} bytes`));
        return;
      }
      // uWS neuters the chunk after this callback returns: copy it.
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) {
        done = true;
        state.bodyPending = false;
        resolve(Buffer.concat(chunks, size));
      }
    });
    state.onAbort = () => reject(new Error('client aborted the request'));
  });
}

function parseBody(raw: Buffer, contentType: string): unknown {
  if (contentType.startsWith('application/msgpack')) return decodeMsgpack(raw);
  if (contentType !== '' && !contentType.startsWith('application/json')) {
    throw new RedpointError('unsupported_media_type', `unsupported content-type ${contentType}`);
  }
  if (raw.length === 0) throw new RedpointError('bad_json', 'empty body');
  return decodeJson(raw.toString('utf8'));
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

function statusLine(status: number): string {
  return `${status} ${STATUS_TEXT[status] ?? ''}`.trim();
}
