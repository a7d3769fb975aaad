import type { Logger } from 'pino';
import { decodeJson, decodeMsgpack, encodeMsgpack } from '../../protocol/codec.js';
import { ERROR_CODES, RedpointError } from '../../protocol/errors.js';
import { ENDPOINTS } from '../../protocol/http-api.js';
import { LIMITS } from '../../protocol/limits.js';
import type { ErrorBody } from '../../protocol/replies.js';
import { OutcomeUnknownError, StoreUnavailableError } from '../engine/store-errors.js';
import { httpRequestKey, type Metrics } from '../metrics/metrics.js';
import { wireError } from './error-mapper.js';
import { framingFault } from './framing.js';
import { RetryLaterError } from './user-budget.js';
import type { HttpRequest, HttpResponse, TemplatedApp } from './uws.js';

/** What a handler sees: everything copied out of uWS's stack-allocated request before any await. */
export interface RequestContext {
  method: string;
  url: string;
  params: string[];
  /** The names of `params` in the route's pattern (`uid`, `conv`), for errors that name them. */
  paramNames: readonly string[];
  query: URLSearchParams;
  authorization: string;
  wantsMsgpack: boolean;
  /** The parsed body (JSON or MessagePack by Content-Type), or undefined when the route takes none. */
  body: unknown;
  /** The body's bytes as received, for a route with `keepRawBody` (a signature is checked over the bytes sent, not a re-encoding). */
  rawBody?: Buffer | undefined;
  /** The request headers a route named in `keepHeaders` (lower case; '' when absent). */
  headers?: Record<string, string> | undefined;
  /** What the route's `authorize` returned: the authenticated user id, or null for the API key. */
  subject: string | null;
  /** The name of the API key that authenticated the request (logged), if one did. */
  apiKeyName: string | null;
  /** The request's Origin header ('' without one): what CORS decides on. */
  origin: string;
  requestId: string;
}

export interface Reply {
  status?: number;
  body: unknown;
  /** Raw text reply (e.g. Prometheus exposition) instead of JSON/MessagePack. */
  text?: { contentType: string; content: string };
  /** Extra response headers (lower-case names). */
  headers?: Readonly<Record<string, string>>;
  /**
   * The body as pieces that concatenated are `body` encoded (a large sync reply): written one
   * event loop turn apart, as the client takes them, instead of encoded and sent at once.
   */
  pieces?: (msgpack: boolean) => Iterable<string | Uint8Array>;
}

export type Handler = (ctx: RequestContext) => Promise<Reply>;

/** Checks credentials; returns the user id it authenticated (null: the message service's API key). */
export type Authorize = (ctx: RequestContext) => Promise<string | null> | string | null;

export interface RouteOptions {
  /** Read and parse a request body. */
  body?: boolean;
  /** With `body`: also keep the bytes as received in `ctx.rawBody` (the dev receiver of the badge hook checks its signature). */
  keepRawBody?: boolean;
  /** Request headers (lower case) to copy into `ctx.headers`: uWS' request is gone after the first await. */
  keepHeaders?: readonly string[];
  /** Runs before the body is parsed, so an unauthenticated request costs no parsing. */
  authorize?: Authorize;
  /** Metric label; the pattern by default. */
  name?: string;
  /**
   * The route changes state, so a failure may leave its outcome unknown. Default: what the
   * endpoint table (protocol/http-api.ts, the OpenAPI document's source) says, else every method
   * but GET.
   */
  write?: boolean;
}

export interface RouterOptions {
  /**
   * A request still waiting after this long while the store is (or was, since the request came)
   * in trouble is answered at once: 503 `unavailable`, or `outcome_unknown` for a write whose
   * handler had started. A request doing long but healthy work (a membership change of
   * thousands) goes on.
   */
  requestTimeoutMs: number;
  /** Whether the store has been in trouble since `since` (StoreHealth.troubledSince). */
  storeTroubledSince: (since: number) => boolean;
}

/** How often a request past its bound looks again whether the store is in trouble. */
const TROUBLE_RECHECK_MS = 250;

/** Seconds a client should wait before retrying a 503 (sent as Retry-After on every one). */
const RETRY_AFTER_SECONDS = 1;

/**
 * Every reply that keeps its connection says `Keep-Alive: timeout=5`: uWebSockets.js closes an
 * HTTP connection 8 to 12 s after its last request (HTTP_IDLE_TIMEOUT_S = 10 in its
 * HttpContext.h, checked in uSockets' 4 s ticks), and a client that reuses one just as it closes
 * gets ECONNRESET for a request the server never read. Clients that read the hint (undici, so
 * fetch; Node's http.Agent from v24.5) close a pooled connection before it runs out, and stop
 * racing the close without any setting (PROTOCOL.md, "Idle connections").
 */
export const KEEP_ALIVE_HINT_SECONDS = 5;
const KEEP_ALIVE_HINT = `timeout=${KEEP_ALIVE_HINT_SECONDS}`;

export type Method = 'get' | 'post' | 'put' | 'del' | 'options';

/**
 * The status a request is counted under when its client went away before its body arrived
 * (nginx's "client closed request"): a client's event, never written to anyone, not a 5xx.
 */
const CLIENT_CLOSED_REQUEST = 499;

/** The client closed its connection in the middle of sending the body. */
class ClientAbortedError extends Error {
  constructor(readonly received: number) {
    super('client aborted the request');
  }
}

let requestCounter = 0;

/**
 * Registers routes on a uWS app with body limits, abort handling, corked writes, JSON or
 * MessagePack negotiation and one error format. Handlers never touch uWS objects.
 */
export class HttpRouter {
  private closing = false;
  /** Requests being handled, each with a way to answer it now (drain's deadline). */
  private readonly inFlight = new Set<() => void>();
  private drained: (() => void) | undefined;
  private lastArrival = 0;
  private closingSince = 0;
  /** Requests read and requests answered (or given up by their client), for the shutdown's account. */
  private received = 0;
  private finished = 0;
  /** Every route registered, in order: what the contract test compares with the OpenAPI document. */
  readonly routes: Array<{ method: Method; pattern: string }> = [];
  /** Headers added to every reply, errors and 404/405 included (CORS). */
  responseHeaders: ((ctx: RequestContext) => Readonly<Record<string, string>> | undefined) | undefined;

  constructor(
    private readonly app: TemplatedApp,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly options: RouterOptions,
  ) {
    metrics.httpInFlightSources.add(() => this.inFlight.size);
  }

  /**
   * After this every new request is answered 503 `unavailable` (graceful shutdown), and every
   * reply closes its connection, so no keep-alive connection is left to take a request and drop it.
   */
  refuseNew(): void {
    this.closing = true;
    this.closingSince = Date.now();
  }

  /**
   * Resolves once every request in flight is answered; after `timeoutMs` the rest are answered
   * at once, 503 with their outcome stated (`outcome_unknown` for writes already handed over).
   */
  async drain(timeoutMs: number): Promise<void> {
    if (this.inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise<void>((resolve) => (this.drained = resolve)), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    for (const answerNow of [...this.inFlight]) answerNow();
  }

  /**
   * Resolves once no request has arrived for `quietMs`, counting from refuseNew() (at most after
   * `maxMs`). Shutting down, a client whose keep-alive connection is idle may send on it at any
   * moment; while the server still answers (503, closing that connection) the client moves to a
   * new one, which is refused. Closing only once the requests stop leaves no request written into
   * a connection being closed, but for one sent at that very instant (HTTP/1.1 keep-alive's own
   * race). Even when no request came since refuseNew() the idle connections stay open `quietMs`:
   * a busy client may not have run since, and its next request goes out on one of them.
   */
  async quiet(quietMs: number, maxMs: number): Promise<void> {
    const deadline = Date.now() + maxMs;
    for (;;) {
      const since = Math.max(this.lastArrival, this.closingSince);
      const wait = Math.min(since + quietMs - Date.now(), deadline - Date.now());
      if (wait <= 0) return;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  /**
   * Requests this router read whose answer it has not written (nor their client given up on).
   * Logged as the connections close at shutdown: 0 there means a request that then fails with a
   * connection error was never read (HTTP/1.1 keep-alive's race), not accepted and dropped.
   */
  get unanswered(): number {
    return this.received - this.finished;
  }

  route(method: Method, pattern: string, handler: Handler, options: RouteOptions = {}): void {
    const paramNames = [...pattern.matchAll(/\/:([^/]+)/g)].map((m) => m[1] ?? '');
    const name = options.name ?? pattern;
    this.routes.push({ method, pattern });
    const documented = ENDPOINTS.find((e) => e.method === (method === 'del' ? 'delete' : method) && e.path === pattern);
    const write = options.write ?? documented?.write ?? (method !== 'get' && method !== 'options');
    this.app[method](pattern, (res, req) => this.handle(res, req, handler, paramNames, name, { ...options, write }));
  }

  /** Any method on a known path other than the registered ones → 405; unknown path → 404. */
  fallback(knownPatterns: readonly string[]): void {
    for (const pattern of knownPatterns) {
      const allowed = this.routes.filter((r) => r.pattern === pattern).map((r) => (r.method === 'del' ? 'DELETE' : r.method.toUpperCase()));
      const refusal = new RedpointError('method_not_allowed', `method not allowed: ${pattern} takes ${allowed.join(', ')}`);
      this.app.any(pattern, (res, req) => this.sendError(res, req, refusal));
    }
    const unknown = new RedpointError('not_found', 'no such endpoint: the endpoints are listed at GET /openapi.json');
    this.app.any('/*', (res, req) => this.sendError(res, req, unknown));
  }

  private handle(res: HttpResponse, req: HttpRequest, handler: Handler, paramNames: readonly string[], name: string, options: RouteOptions): void {
    if (this.refusedFraming(res, req, name)) return;
    const started = performance.now();
    const params: string[] = [];
    for (let i = 0; i < paramNames.length; i++) params.push(req.getParameter(i));
    const contentType = req.getHeader('content-type');
    const ctx = this.context(req, params, paramNames);
    if (options.keepHeaders) ctx.headers = Object.fromEntries(options.keepHeaders.map((h) => [h, req.getHeader(h)]));
    const state: AbortState = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
      state.onAbort?.();
    });
    const write = options.write === true;
    this.received++;
    this.lastArrival = Date.now();
    if (this.closing) {
      this.metrics.unavailableReplies.inc({ code: 'unavailable', transport: 'http' });
      let answered = false;
      const refuse = (): void => {
        if (answered) return;
        answered = true;
        this.inFlight.delete(refuse);
        this.finish(res, state, ctx, name, started, errorReply(new RedpointError('unavailable', 'server is shutting down; nothing was applied')));
        if (this.inFlight.size === 0) this.drained?.();
      };
      // Read the body first: closing a connection with unread input makes the kernel reset it,
      // and the client may lose the answer. Drain waits for it like for any request.
      if (options.body) {
        this.inFlight.add(refuse);
        readBody(res, state).then(refuse, refuse);
      } else {
        refuse();
      }
      return;
    }
    // uWS delivers body chunks only to a handler attached now; parsing waits for authorization.
    const body = options.body ? readBody(res, state) : undefined;
    body?.catch(() => undefined);
    let handed = false;
    const work = async (): Promise<Reply> => {
      if (options.authorize) {
        // The API key check answers at once: no promise to wait on for it.
        const subject = options.authorize(ctx);
        ctx.subject = subject instanceof Promise ? await subject : subject;
      }
      if (body) {
        const raw = await body;
        if (options.keepRawBody) ctx.rawBody = raw;
        ctx.body = parseBody(raw, contentType);
      }
      handed = true;
      return handler(ctx);
    };
    // One answer per request, whichever comes first: the handler's reply (or error), or the bound
    // below. Settled by plain callbacks rather than racing promises: no promise per request for
    // the bound, nor for the race.
    let answered = false;
    let timer: NodeJS.Timeout | undefined;
    const answer = (reply: Reply): void => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      this.inFlight.delete(answerNow);
      this.finish(res, state, ctx, name, started, reply);
      if (this.inFlight.size === 0) this.drained?.();
    };
    const fail = (err: unknown): void => {
      if (answered) return;
      if (err instanceof ClientAbortedError) {
        // Mobile networks drop uploads all the time: info, no stack, no error count.
        this.log.info(
          { event: 'request_aborted', requestId: ctx.requestId, method: ctx.method, url: ctx.url, bodyBytes: err.received },
          'client went away before its request body arrived',
        );
        answer({ status: CLIENT_CLOSED_REQUEST, body: null });
      } else answer(this.toErrorReply(err, ctx, write));
    };
    // The bound of every request: whatever the handler still waits for, the client gets an
    // answer that says what is known (nothing applied before the handler ran; unknown after).
    const answerNow = (): void => {
      const what = `no answer within ${this.options.requestTimeoutMs} ms`;
      fail(handed ? new OutcomeUnknownError('deadline', what) : new StoreUnavailableError('deadline', what));
    };
    const arrived = Date.now();
    const check = (): void => {
      if (this.options.storeTroubledSince(arrived)) answerNow();
      else timer = setTimeout(check, TROUBLE_RECHECK_MS);
    };
    timer = setTimeout(check, this.options.requestTimeoutMs);
    this.inFlight.add(answerNow);
    work().then(answer, fail);
  }

  private context(req: HttpRequest, params: string[], paramNames: readonly string[]): RequestContext {
    // The query string is copied now (uWS' request is gone after the first await) but parsed only
    // by the routes that read it: most requests (every POST /v1/messages) have none.
    const rawQuery = req.getQuery();
    let query: URLSearchParams | undefined;
    return {
      method: req.getMethod(),
      url: req.getUrl(),
      params,
      paramNames,
      get query(): URLSearchParams {
        query ??= new URLSearchParams(rawQuery);
        return query;
      },
      authorization: req.getHeader('authorization'),
      wantsMsgpack: req.getHeader('accept').includes('application/msgpack'),
      body: undefined,
      rawBody: undefined,
      headers: undefined,
      subject: null,
      apiKeyName: null,
      origin: req.getHeader('origin'),
      requestId: req.getHeader('x-request-id') || `r${(++requestCounter).toString(36)}`,
    };
  }

  private finish(res: HttpResponse, state: AbortState, ctx: RequestContext, name: string, started: number, reply: Reply): void {
    const status = reply.status ?? 200;
    // Built only when it is written: the object and its spread cost every request otherwise.
    if (this.log.isLevelEnabled('debug')) {
      this.log.debug(
        {
          requestId: ctx.requestId,
          method: ctx.method,
          url: ctx.url,
          status,
          ms: performance.now() - started,
          ...(ctx.apiKeyName ? { apiKey: ctx.apiKeyName } : {}),
        },
        'request',
      );
    }
    this.metrics.httpRequestCounts.add(httpRequestKey(name, status));
    this.metrics.httpDuration.observe({ route: name }, (performance.now() - started) / 1000);
    if (state.aborted) {
      this.finished++;
      return;
    }
    let contentType: string;
    let payload: string | Uint8Array;
    let rest: Iterator<string | Uint8Array> | undefined;
    if (reply.text) {
      contentType = reply.text.contentType;
      payload = reply.text.content;
    } else if (reply.pieces) {
      contentType = ctx.wantsMsgpack ? 'application/msgpack' : 'application/json';
      rest = reply.pieces(ctx.wantsMsgpack)[Symbol.iterator]();
      const first = rest.next();
      payload = first.done ? '' : first.value;
    } else if (ctx.wantsMsgpack) {
      contentType = 'application/msgpack';
      payload = encodeMsgpack(reply.body);
    } else {
      contentType = 'application/json';
      payload = JSON.stringify(reply.body);
    }
    const own = this.responseHeaders?.(ctx);
    // Merged (the reply's win) only when both have some: most replies have neither.
    const headers = own && reply.headers ? { ...own, ...reply.headers } : (reply.headers ?? own);
    // Shutting down: this reply closes the connection (uWS adds `Connection: close`).
    const close = state.bodyPending === true || this.closing;
    let writable: Promise<void> = Promise.resolve();
    res.cork(() => {
      res.writeStatus(statusLine(status)).writeHeader('content-type', contentType).writeHeader('x-request-id', ctx.requestId);
      if (status === 503) res.writeHeader('retry-after', String(RETRY_AFTER_SECONDS));
      if (!close) res.writeHeader('keep-alive', KEEP_ALIVE_HINT);
      if (headers) for (const [header, value] of Object.entries(headers)) res.writeHeader(header, value);
      // A body may still be streaming in (oversize, or refused before it was read): close rather
      // than read the rest.
      if (!rest) res.end(payload, close);
      else if (res.write(payload)) writable = Promise.resolve();
      else writable = whenWritable(res);
    });
    // A streamed answer counts once its last piece is written (or its client went away).
    if (!rest) this.finished++;
    else {
      const done = (): void => {
        this.finished++;
      };
      streamRest(res, state, rest, writable, close).then(done, done);
    }
  }

  private toErrorReply(err: unknown, ctx: RequestContext, write: boolean): Reply {
    const e = wireError(err, {
      write,
      transport: 'http',
      log: this.log,
      metrics: this.metrics,
      fields: { requestId: ctx.requestId, method: ctx.method, url: ctx.url },
    });
    return errorReply(e);
  }

  /** Answers at once (404/405), in the format the client asked for. */
  private sendError(res: HttpResponse, req: HttpRequest, err: RedpointError): void {
    if (this.refusedFraming(res, req, 'fallback')) return;
    const ctx = this.context(req, [], []);
    this.received++;
    this.finish(res, { aborted: false }, ctx, 'fallback', performance.now(), this.toErrorReply(err, ctx, false));
  }

  /**
   * Every route, the 404/405 fallback and the WebSocket upgrade start here: a request whose body length is ambiguous
   * is answered 400 `bad_framing` without reading it, and its connection closed, so that no byte
   * after its headers is read as a request. The answer is written on the next turn, not now: as
   * soon as this handler returns, uWS parses whatever follows the first Content-Length's body in
   * the bytes already read, and serves it if this request is answered; a request found there
   * while this one is unanswered makes uWS close the connection unread instead (onAborted, so the
   * client sees no reply rather than another request's). Bytes that come later are not read:
   * the 400 ends the connection.
   */
  refusedFraming(res: HttpResponse, req: HttpRequest, name: string): boolean {
    const fault = framingFault(req);
    if (fault === undefined) return false;
    const started = performance.now();
    const ctx = this.context(req, [], []);
    // bodyPending: the body is never read, so finish() closes the connection.
    const state: AbortState = { aborted: false, bodyPending: true };
    res.onAborted(() => {
      state.aborted = true;
    });
    this.received++;
    this.log.info({ event: 'bad_framing', requestId: ctx.requestId, method: ctx.method, url: ctx.url, fault }, 'request refused: ambiguous framing');
    const reply = this.toErrorReply(new RedpointError('bad_framing', fault), ctx, false);
    setImmediate(() => this.finish(res, state, ctx, name, started, reply));
    return true;
  }
}

function errorReply(e: RedpointError): Reply {
  const body: ErrorBody = { error: { code: e.code, message: e.message, ...(e.check !== undefined ? { check: e.check } : {}) } };
  // A refusal for rate or cost says when to come back (whole seconds, as HTTP has it).
  if (e instanceof RetryLaterError)
    return { status: ERROR_CODES[e.code].status, body, headers: { 'retry-after': String(Math.max(1, Math.ceil(e.retryAfterMs / 1000))) } };
  return { status: ERROR_CODES[e.code].status, body };
}

/**
 * Writes the remaining pieces of a body one event loop turn apart (others' requests are served
 * in between), each once the previous one has left uWS' buffer, then ends the response; stops
 * when the client goes away.
 */
async function streamRest(res: HttpResponse, state: AbortState, rest: Iterator<string | Uint8Array>, first: Promise<void>, close: boolean): Promise<void> {
  let writable = first;
  for (;;) {
    await writable;
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (state.aborted) return;
    const next = rest.next();
    if (next.done) {
      res.cork(() => res.end('', close));
      return;
    }
    let written = true;
    res.cork(() => {
      written = res.write(next.value);
    });
    writable = written ? Promise.resolve() : whenWritable(res);
  }
}

/** Resolves when uWS can take more of this response (its buffer drained to the socket). */
function whenWritable(res: HttpResponse): Promise<void> {
  return new Promise((resolve) => {
    res.onWritable(() => {
      resolve();
      return true;
    });
  });
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
        // Most bodies come in one chunk, already a copy: no second one.
        resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
      }
    });
    state.onAbort = () => reject(new ClientAbortedError(size));
  });
}

function parseBody(raw: Buffer, contentType: string): unknown {
  if (contentType.startsWith('application/msgpack')) return decodeMsgpack(raw);
  if (contentType !== '' && !contentType.startsWith('application/json')) {
    throw new RedpointError('unsupported_media_type', `unsupported content-type ${contentType}: send application/json (or application/msgpack)`);
  }
  if (raw.length === 0) throw new RedpointError('bad_json', 'empty body: this endpoint takes a JSON (or MessagePack) body');
  return decodeJson(raw.toString('utf8'));
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  204: 'No Content',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  499: 'Client Closed Request',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** Each status line built once, not per reply. */
const STATUS_LINES = new Map<number, string>();

function statusLine(status: number): string {
  let line = STATUS_LINES.get(status);
  if (line === undefined) {
    line = `${status} ${STATUS_TEXT[status] ?? ''}`.trim();
    STATUS_LINES.set(status, line);
  }
  return line;
}
