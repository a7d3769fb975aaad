/**
 * Runs `check` for every key once per `periodMs`, spread evenly over the period instead of all at
 * once: each key gets a random slot of a wheel that turns every `tickMs`, and at most
 * `concurrency` checks run at a time. 50k keys and a 120 s period make ~420 checks a second, not
 * a burst of 50k store calls every 120 s. A key whose check is still queued or running when its
 * slot comes round again is not queued twice, so a slow store never builds a backlog.
 */
export class RollingSweep<K> {
  private readonly slots: Array<Set<K>>;
  private readonly slotOf = new Map<K, number>();
  private readonly queue: K[] = [];
  private readonly queued = new Set<K>();
  private running = 0;
  private position = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    periodMs: number,
    private readonly tickMs: number,
    private readonly concurrency: number,
    private readonly check: (key: K) => Promise<void>,
    private readonly random: () => number = Math.random,
  ) {
    const n = Math.max(1, Math.round(periodMs / tickMs));
    this.slots = Array.from({ length: n }, () => new Set<K>());
  }

  get size(): number {
    return this.slotOf.size;
  }

  add(key: K): void {
    if (this.slotOf.has(key)) return;
    const slot = Math.floor(this.random() * this.slots.length) % this.slots.length;
    this.slotOf.set(key, slot);
    this.slots[slot]?.add(key);
  }

  delete(key: K): void {
    const slot = this.slotOf.get(key);
    if (slot === undefined) return;
    this.slotOf.delete(key);
    this.slots[slot]?.delete(key);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.turn(), this.tickMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
    this.queued.clear();
  }

  /** One tick: queue the keys of the next slot (exposed for tests, which turn the wheel by hand). */
  turn(): void {
    this.position = (this.position + 1) % this.slots.length;
    for (const key of this.slots[this.position] ?? []) {
      if (this.queued.has(key)) continue;
      this.queued.add(key);
      this.queue.push(key);
    }
    this.drain();
  }

  private drain(): void {
    while (this.running < this.concurrency && this.queue.length > 0) {
      const key = this.queue.shift() as K;
      this.running += 1;
      const done = (): void => {
        this.running -= 1;
        this.queued.delete(key);
        this.drain();
      };
      // Only keys still registered are checked: one that left while queued is skipped.
      (this.slotOf.has(key) ? this.check(key) : Promise.resolve()).then(done, done);
    }
  }
}
