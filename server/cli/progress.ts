import { setTimeout as sleep } from 'node:timers/promises';
import { SingleBar } from 'cli-progress';

/**
 * A progress bar on stderr (the report goes to stdout). Not a TTY (CI logs, cron): one plain line
 * every few seconds instead of redraws (cli-progress `noTTYOutput`).
 */
export function progressBar(label: string, unit: string): SingleBar {
  return new SingleBar({
    format: `${label} [{bar}] {percentage}% | {value}/{total} ${unit} | {rate}/s | {detail}`,
    stream: process.stderr,
    noTTYOutput: true,
    notTTYSchedule: 2_000,
    hideCursor: true,
    barsize: 30,
    etaBuffer: 50,
  });
}

/** Items per second since `started` (performance.now()). */
export function rateSince(started: number, items: number): number {
  const seconds = (performance.now() - started) / 1000;
  return seconds > 0 ? Math.round(items / seconds) : 0;
}

/** A page of a reconcile walk, as the walk loop needs it. */
interface WalkedPage {
  cursor: string;
  users: number;
  conversations: number;
  findings: readonly unknown[];
}

/**
 * A reconcile walk from `cursor` to its end (or until interrupted), paced to `rate` ids per
 * second, with a progress bar: each page goes to `add`. Returns the cursor to resume from ('' done).
 */
export async function pacedWalk<P extends WalkedPage>(
  options: { label: string; progress: boolean; expected: number; rate: number; cursor: string; started: number },
  page: (cursor: string) => Promise<P>,
  add: (page: P) => { done: number; findings: number },
  interrupted: () => boolean,
): Promise<string> {
  const bar = options.progress ? progressBar(options.label, 'ids') : undefined;
  bar?.start(options.expected, 0, { rate: 0, detail: '' });
  let cursor = options.cursor;
  do {
    const pageStarted = performance.now();
    const next = await page(cursor);
    const { done, findings } = add(next);
    cursor = next.cursor;
    bar?.setTotal(Math.max(options.expected, done));
    bar?.update(done, { rate: rateSince(options.started, done), detail: `${findings} findings | cursor ${cursor === '' ? 'done' : cursor}` });
    const budget = ((next.users + next.conversations) / options.rate) * 1000 - (performance.now() - pageStarted);
    if (budget > 0 && cursor !== '') await sleep(budget);
  } while (cursor !== '' && !interrupted());
  bar?.stop();
  return cursor;
}
