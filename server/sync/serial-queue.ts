/**
 * Runs async tasks one at a time, in submission order. Conversation-level changes (message
 * flushes, membership changes, mode switches) go through one queue so that, within a process, a
 * join never interleaves with a flush that read the member list before it.
 */
export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    // The chain must survive a failed task; the caller still sees the failure through `result`.
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Resolves once everything submitted so far has finished. */
  async idle(): Promise<void> {
    await this.tail;
  }
}
