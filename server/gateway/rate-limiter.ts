/**
 * Token bucket per connection: `burst` frames at once, `perSecond` sustained. A client that keeps
 * hammering after being refused `closeAfter` times in a row is disconnected.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;
  private refusedInARow = 0;

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly closeAfter: number,
    now: number = performance.now(),
  ) {
    this.tokens = burst;
    this.last = now;
  }

  /** 'ok' to process the frame, 'refuse' to answer rate_limited, 'close' to disconnect. */
  take(now: number = performance.now()): 'ok' | 'refuse' | 'close' {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.perSecond);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      this.refusedInARow = 0;
      return 'ok';
    }
    this.refusedInARow += 1;
    return this.refusedInARow >= this.closeAfter ? 'close' : 'refuse';
  }

  /** Milliseconds until the next frame would be taken (for the refusal's retry hint). */
  retryAfterMs(): number {
    return Math.max(1, Math.ceil(((1 - this.tokens) / this.perSecond) * 1000));
  }
}
