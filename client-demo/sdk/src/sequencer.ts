import type { ChangeFrame } from '../../../protocol/frames.js';
import type { Cursor } from '../../../protocol/types.js';

/**
 * Orders pushes. A `change` is applied only when it is the next version; later ones wait here
 * for the missing one (pushes from several server processes may arrive slightly out of order).
 * It also remembers versions the server said exist (acks, version frames) so that a lost last
 * push is noticed even when no later push reveals the gap.
 */
export class PushSequencer {
  private readonly waiting = new Map<number, ChangeFrame>();
  private known: Cursor | null = null;

  add(change: ChangeFrame): void {
    this.waiting.set(change.v, change);
  }

  /** The server has reached `cursor`: this client should too. */
  expect(cursor: Cursor): void {
    if (!this.known || this.known.epoch !== cursor.epoch || this.known.version < cursor.version) this.known = cursor;
  }

  /** Removes and returns the pushes that continue `cursor`, in order (stale and foreign ones are dropped). */
  take(cursor: Cursor): ChangeFrame[] {
    const ready: ChangeFrame[] = [];
    let version = cursor.version;
    for (;;) {
      const next = this.waiting.get(version + 1);
      if (!next || next.epoch !== cursor.epoch) break;
      this.waiting.delete(version + 1);
      ready.push(next);
      version += 1;
    }
    for (const [v, change] of this.waiting) {
      if (v <= version || change.epoch !== cursor.epoch) this.waiting.delete(v);
    }
    return ready;
  }

  /** Versions past `cursor` are known to exist but have not arrived. */
  behind(cursor: Cursor): boolean {
    if (this.waiting.size > 0) return true;
    return this.known !== null && this.known.epoch === cursor.epoch && this.known.version > cursor.version;
  }

  clear(): void {
    this.waiting.clear();
    this.known = null;
  }
}
