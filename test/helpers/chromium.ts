import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/**
 * Debian's Chromium, headless, driven by playwright-core (`npx playwright install` cannot
 * download here). Fails, never skips, without it: install it with `apt-get install -y chromium`.
 */
const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export interface Chromium {
  browser: Browser;
  /** Closes the browser and removes its temporary HOME. */
  close(): Promise<void>;
}

export async function launchChromium(): Promise<Chromium> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: the browser tests need Debian's chromium (apt-get install -y chromium)`);
  const home = await mkdtemp(join(tmpdir(), 'redpoint-chromium-'));
  // launch() runs Chromium on a fresh temporary profile of its own; each context is a separate
  // storage (a separate device), the pages of one context share it (tabs of one browser).
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, env: { ...process.env, HOME: home } });
  return {
    browser,
    async close() {
      await browser.close();
      await rm(home, { recursive: true, force: true });
    },
  };
}
