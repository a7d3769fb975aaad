import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ARTIFACTS, demoSuite } from './demo-suite.js';
import { openTools, row, seed } from './demo-ui.js';

/**
 * Read receipts on the demo page in real Chromium: alice's own message in her private chat with
 * bob shows ✓ (sent), and ✓✓ once bob opens the chat on his page (his read reaches her as a
 * `reads` push); in a group, "read by N".
 */
const suite = demoSuite();
const DESKTOP = { viewport: { width: 1280, height: 800 } };

describe('the demo shows read receipts', () => {
  it("✓ then ✓✓ on alice's own message once bob opens the chat; 'read by 1' in a group", async () => {
    const { page: alice } = await suite.open('alice', 'R', DESKTOP);
    await openTools(alice);
    await seed(alice);
    await row(alice, 'dm:alice:bob').waitFor({ timeout: 15_000 });
    // alice sends one herself (the tools' "From" may be any member).
    for (const conv of ['dm:alice:bob', 'design-team']) {
      await alice.locator('#send-conv').selectOption(conv);
      await alice.locator('#send-form input[name="sender"]').fill('alice');
      await alice.locator('#send-form input[name="text"]').fill(`mine in ${conv}`);
      await alice.locator('#send-form button[type="submit"]').click();
      await alice
        .locator('#status-text, #notice-text')
        .first()
        .waitFor({ timeout: 5_000 })
        .catch(() => undefined);
    }
    await alice.keyboard.press('Escape');
    await row(alice, 'dm:alice:bob').locator('[data-action="open"]').click();
    const mine = alice.locator('.msg.mine').filter({ hasText: 'mine in dm:alice:bob' });
    await expect.poll(() => mine.locator('[data-role="receipt"]').getAttribute('data-receipt'), { timeout: 15_000 }).toBe('sent');

    const { page: bob } = await suite.open('bob', 'R', DESKTOP);
    await row(bob, 'dm:alice:bob').locator('[data-action="open"]').click();
    await expect.poll(() => mine.locator('[data-role="receipt"]').getAttribute('data-receipt'), { timeout: 15_000 }).toBe('read');
    expect(await mine.locator('[data-role="receipt"]').textContent()).toContain('✓✓');
    await alice.screenshot({ path: join(ARTIFACTS, 'demo-receipts-dm.png') });

    await row(alice, 'design-team').locator('[data-action="open"]').click();
    await row(bob, 'design-team').locator('[data-action="open"]').click();
    const inGroup = alice.locator('.msg.mine').filter({ hasText: 'mine in design-team' });
    await expect.poll(() => inGroup.locator('[data-role="receipt"]').getAttribute('data-receipt'), { timeout: 15_000 }).toBe('read-by-1');
    expect(suite.pageErrors).toEqual([]);
  });
});
