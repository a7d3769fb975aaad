import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { BrowserContext, Page } from 'playwright-core';

/**
 * Layout checks of the demo page on geometry (boxes, computed styles), not pixels: the checks
 * run in the page (probe/layout-probe.ts, bundled here and injected into every page of a
 * context) and return the problems they found as sentences; none is a pass.
 */

/** A name may be cut (ellipsis), but at least this much of it shows (all of it if shorter). */
export const MIN_NAME_PX = 80;

/** What probe/layout-probe.ts puts on `globalThis` (restated: that file is typed with the DOM, this one is not). */
interface Probe {
  layout(minName: number): string[];
  cover(selector: string, clearOf: string[]): string[];
  buttons(): string[];
  scrollToY(y: number): number;
  whole(selector: string): boolean;
  heights(selector: string): number[];
}
/** The page's global scope with the probe (the functions below run there, serialized: no closures). */
interface Globals {
  layoutProbe: Probe;
}

let bundled: Promise<string> | undefined;

/** Every page of `context` gets the probe. */
export async function withProbe(context: BrowserContext): Promise<void> {
  bundled ??= build({
    entryPoints: [fileURLToPath(new URL('./probe/layout-probe.ts', import.meta.url))],
    bundle: true,
    write: false,
    format: 'iife',
    target: 'es2022',
    logLevel: 'silent',
  }).then((r) => r.outputFiles[0]?.text ?? '');
  await context.addInitScript({ content: await bundled });
}

/**
 * Sideways scrolling; the header's parts; per conversation row its avatar, name, level tag (muted, mentions only),
 * subtitle, marks and buttons: inside the row and the viewport, none overlapping another, no
 * text spilling out of its box (cut with an ellipsis is fine), at least MIN_NAME_PX of the name
 * showing (or all of it); rows apart; the test-tool cards inside the viewport.
 */
export function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate((min) => (globalThis as unknown as Globals).layoutProbe.layout(min), MIN_NAME_PX);
}

/** `selector` on screen and not covered: in the viewport, clear of the header bar and of `clearOf`, and hit at its centre. */
export function coverProblems(page: Page, selector: string, clearOf: string[] = []): Promise<string[]> {
  return page.evaluate(([s, c]) => (globalThis as unknown as Globals).layoutProbe.cover(s, c), [selector, clearOf] as const);
}

/** Each row button at rest: cursor pointer, opaque, a visible fill or border, a legible label. */
export function buttonProblems(page: Page): Promise<string[]> {
  return page.evaluate(() => (globalThis as unknown as Globals).layoutProbe.buttons());
}

/** Scrolls to `y` (clamped to the page); returns the scroll position reached. */
export function scrollToY(page: Page, y: number): Promise<number> {
  return page.evaluate((top) => (globalThis as unknown as Globals).layoutProbe.scrollToY(top), y);
}

/** The whole text of `selector` shows. */
export function shownWhole(page: Page, selector: string): Promise<boolean> {
  return page.evaluate((s) => (globalThis as unknown as Globals).layoutProbe.whole(s), selector);
}

/** Heights of the elements `selector` matches. */
export function heights(page: Page, selector: string): Promise<number[]> {
  return page.evaluate((s) => (globalThis as unknown as Globals).layoutProbe.heights(s), selector);
}
