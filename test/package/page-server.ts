import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PageServer {
  /** http://127.0.0.1:<port>/ (a secure context, as Web Locks need). */
  url: string;
  close(): Promise<void>;
}

const HTML = '<!doctype html><meta charset="utf-8"><title>Redpoint package test</title><div id="root"></div><script type="module" src="/page.js"></script>';

/** Serves a bundled page at `/` (script at /page.js) and mints its user tokens at `/token?uid=`. */
export async function servePage(script: string, token: (uid: string) => Promise<string>): Promise<PageServer> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const send = (status: number, type: string, body: string): void => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(body);
    };
    if (url.pathname === '/') return send(200, 'text/html; charset=utf-8', HTML);
    if (url.pathname === '/page.js') return send(200, 'text/javascript; charset=utf-8', script);
    if (url.pathname === '/token') {
      token(url.searchParams.get('uid') ?? '').then(
        (t) => send(200, 'text/plain', t),
        (err: unknown) => send(500, 'text/plain', String(err)),
      );
      return;
    }
    send(404, 'text/plain', 'not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
