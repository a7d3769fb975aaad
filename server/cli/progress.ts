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
