import type { Logger } from 'pino';

/** The signals that stop the server: each leads to a graceful shutdown and exit 0. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/**
 * A stop signal this long after the first one means "now": the shutdown is abandoned and the
 * process exits 1 (an operator pressing Ctrl-C again). Sooner, it is the same request twice: a
 * terminal's Ctrl-C reaches every process of its group, and `npm start` forwards it to node too,
 * so one key press arrives as two signals a few milliseconds apart.
 */
export const FORCE_AFTER_MS = 1_000;

/**
 * Takes SIGTERM and SIGINT from the very start of the process. A signal that comes while the
 * server is still starting (a supervisor or a rollout may send one at any moment) is kept and
 * handed over once the server is up, so it still ends in a graceful shutdown and exit 0 rather
 * than in Node's default: death by the signal. Once stopping, a signal at least FORCE_AFTER_MS
 * after the first goes to `force`.
 */
export class StopSignals {
  private received: string | undefined;
  private firstAt: number | undefined;
  private stop: ((signal: string) => void) | undefined;
  private force: ((signal: string) => void) | undefined;
  private readonly now: () => number;

  constructor(options: { now?: () => number; listen?: boolean } = {}) {
    this.now = options.now ?? Date.now;
    if (options.listen !== false) for (const signal of STOP_SIGNALS) process.on(signal, () => this.deliver(signal));
  }

  /** From now on the signals go to `stop` (the first) and `force` (a later one); one that came before is handed to `stop` at once. */
  handle(stop: (signal: string) => void, force?: (signal: string) => void): void {
    this.stop = stop;
    this.force = force;
    if (this.received !== undefined) stop(this.received);
  }

  /** What a signal does (tests call it with `listen: false`: a real signal would reach the whole test process). */
  deliver(signal: string): void {
    if (this.firstAt === undefined) {
      this.firstAt = this.now();
      if (this.stop) this.stop(signal);
      else this.received = signal;
      return;
    }
    if (this.stop && this.now() - this.firstAt >= FORCE_AFTER_MS) this.force?.(signal);
  }
}

/** What a later stop signal does, for the server and the WORKERS supervisor alike: log it, exit 1 now. */
export function exitAtOnce(log: Logger, fields: Record<string, unknown> = {}): (signal: string) => void {
  return (signal) => {
    log.error({ event: 'shutdown_forced', signal, ...fields }, `${signal} again: exiting now, without finishing the shutdown`);
    process.exit(1);
  };
}
