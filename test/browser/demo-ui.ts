import type { Locator, Page } from 'playwright-core';

/**
 * How a person drives the demo page: a row's actions sit behind its menu (⌄), the test tools
 * behind the bar's button. Shared by the browser tests so each step reads like the click it is.
 */

/** A conversation's row in the chat list. */
export const row = (page: Page, conv: string): Locator => page.locator(`#conversations li[data-conv="${conv}"]`);

/** Opens the row's menu and picks `action` (read, mark-unread, delete; `level` is one of three choices). */
export async function rowAction(page: Page, conv: string, action: string): Promise<void> {
  await openRowMenu(page, conv);
  await row(page, conv).locator(`[role="menu"] button[data-action="${action}"]`).click();
}

/** Opens the row's menu (its trigger shows on hover at desktop width, always on a phone). */
export async function openRowMenu(page: Page, conv: string): Promise<void> {
  const trigger = row(page, conv).locator('button[data-action="menu"]');
  await row(page, conv).hover();
  if ((await trigger.getAttribute('aria-expanded')) !== 'true') await trigger.click();
  await row(page, conv).locator('[role="menu"]').waitFor({ state: 'visible' });
}

/** Opens the test tools (hidden behind the bar's button until asked for). */
export async function openTools(page: Page): Promise<void> {
  if (await page.locator('#tools').isVisible()) return;
  await page.locator('#tools-toggle').click();
  await page.locator('#tools').waitFor({ state: 'visible' });
}

/**
 * Clicks the tools' "Seed" (the tools open) and waits until the page says every message of the
 * seed is acknowledged: a seed still running changes counts after the test has read them (a later
 * chat muted, more messages).
 */
export async function seed(page: Page): Promise<void> {
  await page.locator('#seed').click();
  await page.locator('#log', { hasText: 'Seeded demo conversations' }).waitFor({ timeout: 30_000 });
}
