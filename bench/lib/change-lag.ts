import { LatencyHistogram } from './histogram.js';

/**
 * The durable tier's true window of loss, change by change: from a change's acknowledgement to
 * the end of the first drain whose PostgreSQL write holds it. The drainer's own metric counts
 * from a record's last change, so a record changed again and again before a drain shows only its
 * newest change's wait; this counts every change, the first unpersisted one included.
 *
 * A change acknowledged before a take started is in the state that take read (the take runs
 * after the change's script on the same Redis); one acknowledged while a take was in flight
 * may or may not be, so it is counted at the next write of its record, or, when no later write
 * comes, at the last one (after a full drain, the last write of a record holds all its changes).
 * So the figure may over-state a change's lag, never under-state it.
 */
export class ChangeLag {
  readonly lag = new LatencyHistogram();
  /** Per record ('uid|conv'): acknowledgement times (ms) of its changes not yet known written. */
  private readonly pending = new Map<string, number[]>();
  private readonly lastWrite = new Map<string, number>();
  private readonly takenAt = new WeakMap<object, number>();

  acked(member: string, at: number): void {
    const list = this.pending.get(member);
    if (list) list.push(at);
    else this.pending.set(member, [at]);
  }

  /** Records a take returned, the take having started at `startedAt`. */
  taken(records: ReadonlyArray<object>, startedAt: number): void {
    for (const r of records) this.takenAt.set(r, startedAt);
  }

  /** Records whose PostgreSQL write committed by `at`. */
  written(records: ReadonlyArray<{ member: string }>, at: number): void {
    for (const r of records) {
      this.lastWrite.set(r.member, at);
      const list = this.pending.get(r.member);
      const before = this.takenAt.get(r);
      if (!list || before === undefined) continue;
      const left = list.filter((acked) => {
        if (acked >= before) return true;
        this.lag.recordMs(at - acked);
        return false;
      });
      if (left.length === 0) this.pending.delete(r.member);
      else this.pending.set(r.member, left);
    }
  }

  /** After a full drain: the changes acknowledged during their record's last take; returns how many had no write after them. */
  settle(): number {
    let unwritten = 0;
    for (const [member, list] of this.pending) {
      const last = this.lastWrite.get(member);
      for (const acked of list) {
        if (last !== undefined && last >= acked) this.lag.recordMs(last - acked);
        else unwritten++;
      }
    }
    this.pending.clear();
    return unwritten;
  }
}
