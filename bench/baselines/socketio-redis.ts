/**
 * Baseline (c): the common alternative — Socket.IO 4 with @socket.io/redis-adapter. One room per
 * user and per large conversation; a POST emits `change` to the members' rooms. The adapter
 * delivers locally and PUBLISHes on Redis for other nodes. No unread state is stored: this is
 * Socket.IO's push path alone.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createAdapter } from '@socket.io/redis-adapter';
import { Redis } from 'ioredis';
import { Server } from 'socket.io';
import { Membership, parseMessages, threshold } from './membership.js';
import { convTopic, portFromEnv, userTopic } from './raw-core.js';

const url = process.env.REDIS_URL;
if (!url) throw new Error('REDIS_URL must be set');
const port = portFromEnv();
const membership = new Membership(threshold());

const http = createServer((req, res) => {
  const route = /^\/v1\/conversations\/([^/]+)\/members$/.exec(req.url ?? '');
  if (req.method === 'PUT' && route?.[1]) {
    const conv = decodeURIComponent(route[1]);
    return json(req, res, (body) => {
      const add = (body as { add?: unknown }).add;
      membership.add(conv, Array.isArray(add) ? add.map(String) : []);
      return { conv };
    });
  }
  if (req.method === 'POST' && req.url === '/v1/messages') {
    return json(req, res, (body) => {
      const messages = parseMessages(body);
      for (const m of messages) {
        const c = membership.get(m.conv);
        if (!c) continue;
        const rooms = c.large ? [convTopic(m.conv)] : [...c.members].map(userTopic);
        io.to(rooms).emit('change', { conv: m.conv, lastSeq: m.seq });
      }
      return { ok: true, accepted: messages.length };
    });
  }
  if (req.url === '/healthz') return void res.end('{"ok":true}');
  res.statusCode = 404;
  res.end();
});

const io = new Server(http, {
  transports: ['websocket'],
  serveClient: false,
  adapter: createAdapter(new Redis(url), new Redis(url)),
});
io.on('connection', (socket) => {
  const uid = String((socket.handshake.auth as { uid?: unknown }).uid ?? '');
  void socket.join([userTopic(uid), ...membership.largeConvsOf(uid).map(convTopic)]);
  // Rooms are joined before this event leaves, so the client may start measuring on it.
  socket.emit('ready');
});

function json(req: IncomingMessage, res: ServerResponse, handler: (body: unknown) => unknown): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let status = 200;
    let reply: unknown;
    try {
      reply = handler(JSON.parse(Buffer.concat(chunks).toString()) as unknown);
    } catch (err) {
      status = 400;
      reply = { error: String(err) };
    }
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(reply));
  });
}

http.listen(port, '127.0.0.1');
