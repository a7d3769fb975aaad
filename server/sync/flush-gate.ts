/**
 * Orders conversation-level work within a process: message flushes run concurrently with each
 * other (their writes are max-merges, so order between them cannot matter), while a membership
 * change runs alone, so a join never interleaves with a flush that read the member list before it.
 * A queued membership change holds back later flushes (no starvation).
 */
export class FlushGate {
  private shared = 0;
  private exclusive = false;
  private readonly waiting: Array<{ exclusive: boolean; admit: () => void }> = [];

  run<T>(mode: 'shared' | 'exclusive', task: () => Promise<T>): Promise<T> {
    const exclusive = mode === 'exclusive';
    return this.acquire(exclusive).then(async () => {
      try {
        return await task();
      } finally {
        this.release(exclusive);
      }
    });
  }

  /** Resolves once everything admitted or queued before the call has finished. */
  async idle(): Promise<void> {
    await this.run('exclusive', async () => undefined);
  }

  private acquire(exclusive: boolean): Promise<void> {
    if (this.waiting.length === 0 && this.canAdmit(exclusive)) {
      this.admit(exclusive);
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push({ exclusive, admit: resolve }));
  }

  private canAdmit(exclusive: boolean): boolean {
    return exclusive ? !this.exclusive && this.shared === 0 : !this.exclusive;
  }

  private admit(exclusive: boolean): void {
    if (exclusive) this.exclusive = true;
    else this.shared += 1;
  }

  private release(exclusive: boolean): void {
    if (exclusive) this.exclusive = false;
    else this.shared -= 1;
    // Admit in arrival order while possible: a run of flushes together, or one exclusive task.
    while (this.waiting.length > 0) {
      const next = this.waiting[0];
      if (!next || !this.canAdmit(next.exclusive)) break;
      this.waiting.shift();
      this.admit(next.exclusive);
      next.admit();
    }
  }
}
