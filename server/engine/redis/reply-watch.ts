import { OutcomeUnknownError } from '../store-errors.js';

interface Pending {
  sentAt: number;
  fail(err: unknown): void;
}

/**
 * Times out the commands in flight on one Redis server when it stops answering: no reply for
 * `timeoutMs` while commands wait. Not a timer per command (ioredis's commandTimeout): each
 * command of a large pipelined batch would be timed from when it was sent, so a healthy Redis
 * working through 20,000 scripts, or a busy event loop with the replies already in the socket,
 * would time out the tail of the batch. Here any reply is progress, and the verdict is taken
 * after the event loop has read what arrived (setImmediate runs after the poll phase).
 */
export class ReplyWatch {
  /** In the order sent: the first is the oldest still waiting. */
  private readonly inFlight = new Set<Pending>();
  private lastReply = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly timeoutMs: number) {}

  /** Runs `issue` (in this tick) and settles with it, or rejects with OutcomeUnknownError('timeout'). */
  track<T>(issue: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = { sentAt: Date.now(), fail: reject };
      this.inFlight.add(pending);
      this.arm(this.timeoutMs);
      issue().then(
        (reply) => {
          this.settled(pending);
          resolve(reply);
        },
        (err: unknown) => {
          this.settled(pending);
          reject(err);
        },
      );
    });
  }

  private settled(pending: Pending): void {
    if (!this.inFlight.delete(pending)) return; // timed out already
    this.lastReply = Date.now();
    if (this.inFlight.size === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private arm(ms: number): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      setImmediate(() => this.judge());
    }, ms);
    this.timer.unref();
  }

  private judge(): void {
    const oldest = this.inFlight.values().next().value;
    if (!oldest) return;
    const idleMs = Date.now() - Math.max(this.lastReply, oldest.sentAt);
    if (idleMs < this.timeoutMs) {
      this.arm(this.timeoutMs - idleMs);
      return;
    }
    const waiting = [...this.inFlight];
    this.inFlight.clear();
    for (const p of waiting) p.fail(new OutcomeUnknownError('timeout', `no reply from Redis for ${this.timeoutMs} ms; the command may have been applied`));
  }
}
