import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import { type LaunchedBrowser, launchChromium } from './chromium.js';

/**
 * CORS as a browser enforces it: pages served from two other origins (other ports on
 * 127.0.0.1) call the Redpoint API with fetch in real Chromium. The listed origin reads the
 * replies and the exposed headers; the other is stopped by the browser, and its preflighted
 * write never reaches the store.
 */

let api: TestServer;
let chromium: LaunchedBrowser;
const pages: Server[] = [];
let allowedOrigin: string;
let otherOrigin: string;

/** A tiny web server standing for another site: it serves one empty page. */
async function site(): Promise<string> {
  const server = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>another site</title>'),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  pages.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  allowedOrigin = await site();
  otherOrigin = await site();
  api = await startTestServer({ config: { corsOrigins: [allowedOrigin] } });
  await api.members('team', { add: ['alice', 'bob'] });
  await api.post([
    { conv: 'team', seq: 1, sender: 'bob' },
    { conv: 'team', seq: 2, sender: 'bob' },
  ]);
  chromium = await launchChromium();
});

afterAll(async () => {
  await chromium?.close();
  await api?.close();
  await Promise.all(pages.map((s) => new Promise((resolve) => s.close(resolve))));
});

interface FetchResult {
  ok?: { status: number; requestId: string | null; body: unknown };
  blocked?: string;
}

/** Runs fetch inside the page; a CORS refusal surfaces there as a TypeError. */
function fetchFrom(
  page: Page,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; credentials?: 'include' | 'omit' | 'same-origin' },
): Promise<FetchResult> {
  return page.evaluate(
    async ([u, i]) => {
      try {
        const res = await fetch(u, i);
        return { ok: { status: res.status, requestId: res.headers.get('x-request-id'), body: await res.json() } };
      } catch (err) {
        return { blocked: String(err) };
      }
    },
    [url, init] as const,
  );
}

async function open(origin: string): Promise<Page> {
  const context = await chromium.browser.newContext();
  const page = await context.newPage();
  await page.goto(`${origin}/`);
  return page;
}

describe('a page on another origin, in Chromium', () => {
  it('the listed origin calls the API (simple and preflighted requests) and reads X-Request-Id', async () => {
    const page = await open(allowedOrigin);
    const token = await api.token('alice');
    const auth = { authorization: `Bearer ${token}` };
    const unread = await fetchFrom(page, `${api.url}/v1/users/alice/unread`, { headers: { ...auth, 'x-request-id': 'from-the-page-1' } });
    expect(unread.ok).toMatchObject({ status: 200, requestId: 'from-the-page-1', body: { uid: 'alice', total: 2 } });
    const read = await fetchFrom(page, `${api.url}/v1/users/alice/read`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ conv: 'team', seq: 1 }),
    });
    expect(read.ok).toMatchObject({ status: 200, body: { changed: true, state: { readSeq: 1 } } });
    // An error reply is readable too, so the page can branch on its code.
    const denied = await fetchFrom(page, `${api.url}/v1/users/bob/unread`, { headers: auth });
    expect(denied.ok).toMatchObject({ status: 403, body: { error: { code: 'forbidden' } } });
    // Redpoint never allows credentialed (cookie) requests: it does not use cookies.
    const withCookies = await fetchFrom(page, `${api.url}/v1/users/alice/unread`, { headers: auth, credentials: 'include' });
    expect(withCookies.blocked).toMatch(/TypeError/);
    await page.context().close();
  });

  it('another origin is blocked by the browser, and its write never reaches the store', async () => {
    const page = await open(otherOrigin);
    const token = await api.token('alice');
    const unread = await fetchFrom(page, `${api.url}/v1/users/alice/unread`, { headers: { authorization: `Bearer ${token}` } });
    expect(unread.blocked).toMatch(/TypeError: Failed to fetch/);
    const before = await api.unread('alice');
    const read = await fetchFrom(page, `${api.url}/v1/users/alice/read`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ conv: 'team', seq: 2 }),
    });
    expect(read.blocked).toMatch(/TypeError/);
    expect(await api.unread('alice')).toEqual(before);
    await page.context().close();
  });
});
