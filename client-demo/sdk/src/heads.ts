/**
 * Heads (maxSeq) of the user's read-diffused conversations. A head only ever rises: a sync page
 * read before a `head` push must not lower it (PROTOCOL.md). Kept in a Map, since conversation
 * ids such as `__proto__` are valid; `record` is what protocol/view.ts reads (own keys only).
 */
export class Heads {
  private readonly map = new Map<string, number>();
  private cached: Readonly<Record<string, number>> | null = null;

  constructor(entries: Iterable<[string, number]> = []) {
    for (const [conv, seq] of entries) this.raise(conv, seq);
  }

  raise(conv: string, seq: number): void {
    const current = this.map.get(conv);
    if (current !== undefined && current >= seq) return;
    this.map.set(conv, seq);
    this.cached = null;
  }

  /** Max-merges a reply's `heads`, read by its own keys (a JSON `__proto__` key is an own property). */
  merge(heads: Readonly<Record<string, number>>): void {
    for (const [conv, seq] of Object.entries(heads)) this.raise(conv, seq);
  }

  /** Drops the heads of conversations `keep` says the client no longer has. */
  retain(keep: (conv: string) => boolean): void {
    for (const conv of [...this.map.keys()]) if (!keep(conv)) this.delete(conv);
  }

  delete(conv: string): void {
    if (this.map.delete(conv)) this.cached = null;
  }

  entries(): Array<[string, number]> {
    return [...this.map];
  }

  get record(): Readonly<Record<string, number>> {
    this.cached ??= Object.fromEntries(this.map);
    return this.cached;
  }
}
