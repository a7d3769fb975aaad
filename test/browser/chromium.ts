import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';

/**
 * Debian's Chromium driven by playwright-core, headless, on a fresh temporary profile. Fails,
 * never skips, without Chromium: install it with `apt-get install -y chromium`.
 */
export const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface LaunchedBrowser {
  browser: Browser;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

export async function launchChromium(): Promise<LaunchedBrowser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: the browser tests need Debian's chromium (apt-get install -y chromium)`);
  const profile = await mkdtemp(join(tmpdir(), 'redpoint-chromium-'));
  // launch() runs Chromium on a fresh temporary profile of its own; HOME keeps its other files there too.
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, env: { ...process.env, HOME: profile } });
  return {
    browser,
    close: async () => {
      await browser.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
