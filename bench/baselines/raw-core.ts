import { type HttpResponse, type TemplatedApp, uws } from '../../server/gateway/uws.js';
import { type BaselineMessage, Membership, parseMessages, threshold } from './membership.js';

export const userTopic = (uid: string): string => `u:${uid}`;
export const convTopic = (conv: string): string => `c:${conv}`;

/** What a raw baseline does with a POSTed batch; the reply is sent once it resolves. */
export interface RawStrategy {
  deliver(messages: readonly BaselineMessage[]): Promise<void> | void;
  /** A socket subscribed to a topic (the Redis baseline subscribes its channel). */
  onTopic?(topic: string): void;
}

interface SocketData {
  uid: string;
}

/**
 * The smallest server that does the same job at the protocol's surface: the same POST and PUT
 * bodies, one uWS topic per user and per large conversation, a tiny JSON push. No auth, no
 * validation beyond shape, no state: the floor under everything Redpoint adds.
 */
export function startRawServer(port: number, makeStrategy: (app: TemplatedApp, membership: Membership) => RawStrategy): Promise<void> {
  const app = uws.App();
  const membership = new Membership(threshold());
  const strategy = makeStrategy(app, membership);

  app.put('/v1/conversations/:conv/members', (res, req) => {
    const conv = decodeURIComponent(req.getParameter(0));
    handleJson(res, async (body) => {
      const add = (body as { add?: unknown }).add;
      membership.add(conv, Array.isArray(add) ? add.map(String) : []);
      return { conv };
    });
  });
  app.post('/v1/messages', (res) => {
    handleJson(res, async (body) => {
      const messages = parseMessages(body);
      await strategy.deliver(messages);
      return { ok: true, accepted: messages.length };
    });
  });
  app.get('/healthz', (res) => void res.end('{"ok":true}'));

  app.ws<SocketData>('/v1/ws', {
    idleTimeout: 60,
    maxBackpressure: 1024 * 1024,
    compression: uws.DISABLED,
    upgrade: (res, req, context) => {
      const uid = new URLSearchParams(req.getQuery()).get('uid') ?? '';
      res.upgrade({ uid }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
    },
    open: (ws) => {
      const { uid } = ws.getUserData();
      for (const topic of [userTopic(uid), ...membership.largeConvsOf(uid).map(convTopic)]) {
        ws.subscribe(topic);
        strategy.onTopic?.(topic);
      }
      ws.send('{"t":"ready"}', false);
    },
  });

  return new Promise((resolve, reject) => {
    app.listen('127.0.0.1', port, (token) => (token ? resolve() : reject(new Error(`cannot listen on ${port}`))));
  });
}

/** Reads the body, runs the handler, answers JSON (400 on a handler error). */
function handleJson(res: HttpResponse, handler: (body: unknown) => Promise<unknown>): void {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const chunks: Buffer[] = [];
  res.onData((chunk, isLast) => {
    chunks.push(Buffer.from(chunk.slice(0)));
    if (!isLast) return;
    const run = async (): Promise<{ status: string; body: string }> => {
      try {
        const reply = await handler(JSON.parse(Buffer.concat(chunks).toString()) as unknown);
        return { status: '200 OK', body: JSON.stringify(reply) };
      } catch (err) {
        return { status: '400 Bad Request', body: JSON.stringify({ error: String(err) }) };
      }
    };
    void run().then(({ status, body }) => {
      if (aborted) return;
      res.cork(() => res.writeStatus(status).writeHeader('content-type', 'application/json').end(body));
    });
  });
}

/** Members of a conversation as uWS topics: one per member, or the conversation's when large. */
export function topicsFor(membership: Membership, conv: string): string[] {
  const c = membership.get(conv);
  if (!c) return [];
  return c.large ? [convTopic(conv)] : [...c.members].map(userTopic);
}

export function portFromEnv(): number {
  const port = Number(process.env.PORT);
  if (!Number.isInteger(port) || port <= 0) throw new Error('PORT must be set');
  return port;
}
