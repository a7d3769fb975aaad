import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ARTIFACTS, demoSuite } from './demo-suite.js';
import { openTools, row, seed } from './demo-ui.js';

/**
 * The badge hook shown to a person, in real Chromium: the server's hook delivers to the demo's
 * receiver (as `npm start` sets it up), and alice's page shows the last event her push service
 * got. Reading in her other tab drops it: "push service: badge N → M", M lower.
 */
const suite = demoSuite({ badgeHook: true });
const DESKTOP = { viewport: { width: 1280, height: 800 } };

describe('the demo shows the badge hook', () => {
  it("alice's push service line follows her badge, and drops after she reads in another tab", async () => {
    const { page: first } = await suite.open('alice', 'P1', DESKTOP);
    await openTools(first);
    await seed(first);
    await row(first, 'dm:alice:bob').waitFor({ timeout: 15_000 });
    await first.keyboard.press('Escape');
    const line = first.locator('#push-badge');
    // The seeded unread reaches the push service: the line carries alice's badge as the page shows it.
    const total = async (): Promise<number> => Number((await first.locator('#total [data-role="total"]').textContent())?.match(/\d+/)?.[0] ?? 0);
    await expect.poll(async () => (await line.getAttribute('data-total')) === String(await total()) && (await total()) > 0, { timeout: 15_000 }).toBe(true);
    const before = Number(await line.getAttribute('data-total'));

    // The other tab opens an unread chat, which reads it: the push service gets the drop.
    const { page: second } = await suite.open('alice', 'P2', DESKTOP);
    const unreadRow = second.locator('#conversations li[data-unread]:not([data-unread="0"])').first();
    const conv = await unreadRow.getAttribute('data-conv');
    expect(conv).toBeTruthy();
    await row(second, conv as string)
      .locator('[data-action="open"]')
      .click();
    await expect.poll(async () => Number(await line.getAttribute('data-total')), { timeout: 15_000 }).toBeLessThan(before);
    const after = Number(await line.getAttribute('data-total'));
    expect(await line.textContent()).toMatch(new RegExp(`^push service: badge ${before} → ${after}, \\d+ s ago$`));
    await first.screenshot({ path: join(ARTIFACTS, 'demo-badge-hook.png') });
    expect(suite.pageErrors).toEqual([]);
  });
});
