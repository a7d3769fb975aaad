/** The signals that stop the server: each leads to a graceful shutdown and exit 0. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/**
 * Takes SIGTERM and SIGINT from the very start of the process. A signal that comes while the
 * server is still starting (a supervisor or a rollout may send one at any moment) is kept and
 * handed over once the server is up, so it still ends in a graceful shutdown and exit 0 rather
 * than in Node's default: death by the signal.
 */
export class StopSignals {
  private received: string | undefined;
  private stop: ((signal: string) => void) | undefined;

  constructor() {
    for (const signal of STOP_SIGNALS) process.on(signal, () => this.deliver(signal));
  }

  /** From now on the signals go to `stop`; one that came before is handed to it at once. */
  handle(stop: (signal: string) => void): void {
    this.stop = stop;
    if (this.received !== undefined) stop(this.received);
  }

  private deliver(signal: string): void {
    if (this.stop) this.stop(signal);
    else this.received ??= signal;
  }
}
