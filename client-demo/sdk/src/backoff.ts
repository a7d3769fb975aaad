import type { BackoffOptions } from './types.js';

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 500, maxMs: 30_000 };

/**
 * Exponential backoff with full jitter: attempt n waits a uniform draw in
 * [0, min(maxMs, baseMs * 2^n)). Spreads a reconnect storm after a server restart over the
 * whole window instead of bunching clients at fixed delays.
 */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly options: BackoffOptions,
    private readonly random: () => number = Math.random,
  ) {}

  next(): number {
    const cap = Math.min(this.options.maxMs, this.options.baseMs * 2 ** Math.min(this.attempt, 30));
    this.attempt += 1;
    return Math.floor(this.random() * cap);
  }

  reset(): void {
    this.attempt = 0;
  }
}
