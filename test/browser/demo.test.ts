import { join } from 'node:path';
import type { BrowserContext, Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { RedpointState } from '../../client-demo/sdk/src/index.js';
import { shown, truth } from '../sdk/wait.js';
import { ARTIFACTS, demoSuite } from './demo-suite.js';
import { openRowMenu, rowAction } from './demo-ui.js';

/**
 * The demo page in real Chromium, as two devices of one user (two browser contexts: separate
 * storage, separate sockets) against a real server in dev mode. Fails, never skips, without
 * Chromium: install it with `apt-get install -y chromium`.
 */
const UID = 'alice';

/** What main.ts exposes on `window.redpoint`. */
interface DemoGlobals {
  redpoint: { client: { state: RedpointState }; shownAt: Record<string, { unread: number; at: number }> };
}

const suite = demoSuite();
const pageErrors = suite.pageErrors;
/** Each device's browser context (its own storage: a page opened in it later is the same device). */
const devices = new Map<string, BrowserContext>();

async function openDevice(device: string): Promise<Page> {
  const { page, context } = await suite.open(UID, device, { viewport: { width: 1200, height: 780 } });
  devices.set(device, context);
  return page;
}

/** Resolves when `page` shows `unread` for `conv`; returns the wall-clock ms at which it painted it. */
async function shownAt(page: Page, conv: string, unread: number): Promise<number> {
  await page.waitForFunction(([c, n]) => (globalThis as unknown as DemoGlobals).redpoint.shownAt[c as string]?.unread === n, [conv, unread] as const, {
    timeout: 10_000,
  });
  return page.evaluate((c) => (globalThis as unknown as DemoGlobals).redpoint.shownAt[c]?.at ?? 0, conv);
}

function state(page: Page): Promise<RedpointState> {
  return page.evaluate(() => (globalThis as unknown as DemoGlobals).redpoint.client.state);
}

/** Both pages show exactly the server's summary, live. */
async function converged(pages: Page[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const expected = JSON.stringify(truth(await suite.h.unread(UID)));
    const states = await Promise.all(pages.map(state));
    if (states.every((s) => s.status === 'SYNCED' && !s.stale && JSON.stringify(shown(s)) === expected)) return;
    if (Date.now() > deadline)
      throw new Error(`pages did not converge:\n server ${expected}\n pages ${states.map((s) => JSON.stringify(s)).join('\n       ')}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

const badge = (page: Page, conv: string) => page.locator(`li[data-conv="${conv}"] [data-role="unread"]`);

/** The text of the element, once it is there (the page paints on the next animation frame). */
async function text(locator: Locator): Promise<string> {
  await locator.waitFor({ timeout: 5000 });
  return (await locator.textContent()) ?? '';
}

describe('demo page, two devices of one user', () => {
  it('dots appear and clear on both, survive a server stop as stale counts, and converge after a restart', async () => {
    await suite.h.members('bob', { add: [UID, 'bob'], category: 'private' });
    await suite.h.members('design-team', { add: [UID, 'bob', 'carol', 'dave'], category: 'group' });
    await suite.h.members('release-train', { add: [UID, 'carol', 'erin'], category: 'group' });
    await suite.h.members('random', { add: [UID, 'dave', 'erin'], category: 'group' });
    const [a, b] = await Promise.all([openDevice('A'), openDevice('B')]);

    // Message → the dot appears on both; read on A → it clears on B. Measured per run.
    const appear: number[] = [];
    const clear: number[] = [];
    for (let run = 1; run <= 5; run++) {
      const sent = Date.now();
      await suite.h.post({ conv: 'bob', seq: run, sender: 'bob' });
      const [atA, atB] = await Promise.all([shownAt(a, 'bob', 1), shownAt(b, 'bob', 1)]);
      appear.push(Math.max(atA, atB) - sent);
      expect(await text(badge(b, 'bob'))).toBe('1');

      // The menu opens before the clock starts: the figure is the read's, not the menu's.
      await openRowMenu(a, 'bob');
      const clicked = Date.now();
      await a.locator('li[data-conv="bob"] [role="menu"] button[data-action="read"]').click();
      const clearedB = await shownAt(b, 'bob', 0);
      clear.push(clearedB - clicked);
      expect(await badge(a, 'bob').count()).toBe(0);
      expect(await badge(b, 'bob').count()).toBe(0);
    }
    console.log(`dot appears on both pages: median ${median(appear)} ms (runs: ${appear.join(', ')})`);
    console.log(`read on A clears B: median ${median(clear)} ms (runs: ${clear.join(', ')}; includes the 500 ms read batch window)`);

    // Something worth looking at: mentions, a muted group, a "marked unread" dot.
    await suite.h.api('POST', '/v1/messages', {
      messages: [
        ...[1, 2, 3, 4, 5].map((seq) => ({ conv: 'design-team', seq, sender: 'carol' })),
        { conv: 'design-team', seq: 6, sender: 'dave', mentions: [UID] },
        ...[1, 2, 3].map((seq) => ({ conv: 'release-train', seq, sender: 'erin' })),
        ...Array.from({ length: 12 }, (_, i) => ({ conv: 'random', seq: i + 1, sender: 'dave' })),
        { conv: 'bob', seq: 6, sender: 'bob' },
        { conv: 'bob', seq: 7, sender: 'bob' },
      ],
    });
    await suite.h.api('PUT', `/v1/users/${UID}/conversations/random`, { muted: true });
    await rowAction(b, 'release-train', 'read');
    await rowAction(b, 'release-train', 'mark-unread');
    await converged([a, b]);
    await a.locator('li[data-conv="release-train"] [data-role="marked"]').waitFor();
    await a.locator('li[data-conv="design-team"] [data-role="mention"]').waitFor();
    expect(await text(badge(a, 'random'))).toBe('12');
    expect(await a.title()).toBe(`(8) Redpoint · ${UID}`);
    // Nothing hovered in the picture (the last click left the pointer on a button).
    await a.mouse.move(0, 0);
    await a.screenshot({ path: join(ARTIFACTS, 'demo-live.png') });

    // Server stopped: both pages keep the counts, marked stale; no blank list, no zeros.
    const before = await Promise.all([a, b].map(async (p) => shown(await state(p))));
    await suite.h.down();
    for (const page of [a, b]) {
      await page.locator('#connection[data-state="offline"]').waitFor({ timeout: 10_000 });
      await page.locator('body[data-stale="true"]').waitFor();
      await page.locator('#banner').waitFor({ state: 'visible' });
      expect(await text(badge(page, 'design-team'))).toBe('6');
      expect(await text(page.locator('#total [data-role="total"]'))).toBe('8');
      const s = await state(page);
      expect(s.stale).toBe(true);
      expect(s.totals?.total).toBe(8);
    }
    expect(await Promise.all([a, b].map(async (p) => shown(await state(p))))).toEqual(before);
    await b.screenshot({ path: join(ARTIFACTS, 'demo-stale.png') });

    // Restarted on the same port over the same state: both reconnect and converge, live again.
    await suite.h.up();
    await Promise.all([a, b].map((p) => p.locator('#connection[data-state="live"]').waitFor({ timeout: 15_000 })));
    await suite.h.post({ conv: 'bob', seq: 8, sender: 'bob' });
    await Promise.all([shownAt(a, 'bob', 3), shownAt(b, 'bob', 3)]);
    await converged([a, b]);
    await a.screenshot({ path: join(ARTIFACTS, 'demo-after-restart.png') });

    // A page of device B that loads while its WebSocket cannot connect: the counts come from
    // IndexedDB, marked stale, instead of a blank list or zeros. (`share=0`: a tab of its own;
    // sharing, it would follow page B's live socket.)
    const expected = shown(await state(b));
    const offlineTab = await devices.get('B')!.newPage();
    await offlineTab.routeWebSocket(/\/v1\/ws/, (ws) => ws.close({ code: 1011, reason: 'test: no socket' }));
    await offlineTab.goto(`${suite.h.url}/?uid=${UID}&device=B&share=0`);
    await offlineTab.locator('body[data-stale="true"]').waitFor();
    const cached = await state(offlineTab);
    expect(cached.status).toBe('DIRTY');
    expect(shown(cached)).toEqual(expected);
    expect(await text(offlineTab.locator('#total [data-role="total"]'))).toBe(String(expected.total));
    await offlineTab.screenshot({ path: join(ARTIFACTS, 'demo-cached-offline.png') });
    expect(pageErrors).toEqual([]);
  });
});
