import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { DEMO_BADGE_HOOK_PATH, DEMO_BADGE_HOOK_SECRET } from '../../client-demo/badge-receiver.js';
import { registerRoutes as registerDemoPage } from '../../client-demo/page-routes.js';
import { DEV_API_KEY, DEV_JWT_SECRET } from '../../server/config.js';
import { freePort } from '../helpers/processes.js';
import { type Harness, startHarness } from '../sdk/harness.js';
import { type LaunchedBrowser, launchChromium } from './chromium.js';
import { withProbe } from './layout.js';

/**
 * What the demo page's browser tests share: a dev-mode server with the demo page (the dev
 * entry's route hook) and Chromium, for the whole file; each device a browser context of its own
 * (own storage, own socket) with the layout probe. Screenshots go to ARTIFACTS to look at.
 */
export const ARTIFACTS = join(process.cwd(), 'test-artifacts');
export const PHONE = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 3, isMobile: true, hasTouch: true };
export type ContextOptions = typeof PHONE | { viewport: { width: number; height: number } };

export interface DemoSuite {
  /** The file's server: started before its first test, closed after its last. */
  readonly h: Harness;
  /** Uncaught errors of every page so far, as `<device>: <message>`. */
  readonly pageErrors: string[];
  /** The page of `uid` on `device`, once its connection shows live. */
  open(uid: string, device: string, options: ContextOptions): Promise<{ page: Page; context: BrowserContext }>;
}

/**
 * `badgeHook`: the server's badge hook delivers to the demo's own receiver, as `npm start` sets
 * it up (client-demo/dev-server.ts), so the page's "push service" line shows its events.
 */
export function demoSuite(options: { badgeHook?: boolean } = {}): DemoSuite {
  let h: Harness | undefined;
  let chromium: LaunchedBrowser | undefined;
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    const port = options.badgeHook ? await freePort() : 0;
    const badgeHook = options.badgeHook
      ? {
          webhook: { url: `http://127.0.0.1:${port}${DEMO_BADGE_HOOK_PATH}`, secret: DEMO_BADGE_HOOK_SECRET, timeoutMs: 5_000 },
          intervalMs: 300,
          attempts: 3,
          retryMs: 100,
          parkMs: 1_000,
          concurrency: 4,
          socketlessOnly: false,
        }
      : undefined;
    h = await startHarness({
      config: { devMode: true, apiKey: DEV_API_KEY, jwtSecret: DEV_JWT_SECRET, ...(badgeHook ? { port, badgeHook } : {}) },
      routes: registerDemoPage,
    });
    chromium = await launchChromium();
    browser = chromium.browser;
    await mkdir(ARTIFACTS, { recursive: true });
  });
  afterAll(async () => {
    await Promise.all(contexts.map((c) => c.close()));
    await chromium?.close();
    await h?.close();
  });

  return {
    get h(): Harness {
      if (!h) throw new Error('demoSuite: the server is not started yet (use it inside a test or a later beforeAll)');
      return h;
    },
    pageErrors,
    async open(uid, device, options) {
      if (!browser || !h) throw new Error('demoSuite: not started');
      const context = await browser.newContext(options);
      contexts.push(context);
      await withProbe(context);
      const page = await context.newPage();
      page.on('pageerror', (err) => pageErrors.push(`${uid}/${device}: ${err.message}`));
      await page.goto(`${h.url}/?uid=${uid}&device=${device}`);
      await page.locator('#connection[data-state="live"]').waitFor({ timeout: 15_000 });
      return { page, context };
    },
  };
}
