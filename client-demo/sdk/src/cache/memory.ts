import type { CacheAdapter, CachedState } from './cache.js';

/** Keeps the state in this object: share one instance between clients to simulate a restart. */
export class MemoryCache implements CacheAdapter {
  private value: string | undefined;

  async load(): Promise<CachedState | undefined> {
    return this.value === undefined ? undefined : (JSON.parse(this.value) as CachedState);
  }

  /** Stored serialized, so a later mutation by the caller cannot reach the cached copy. */
  async save(state: CachedState): Promise<void> {
    this.value = JSON.stringify(state);
  }

  async clear(): Promise<void> {
    this.value = undefined;
  }
}
