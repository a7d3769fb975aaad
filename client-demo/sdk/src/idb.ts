import { createStore, del, get, set, type UseStore } from 'idb-keyval';
import { type CacheAdapter, type CachedState, validCachedState } from './cache/cache.js';

/**
 * Browser: one IndexedDB record per key (use one key per user). IndexedDB structured-clones the
 * value, so what is stored cannot change afterwards.
 */
export class IndexedDbCache implements CacheAdapter {
  private readonly store: UseStore;

  constructor(
    private readonly key = 'state',
    dbName = 'redpoint',
  ) {
    this.store = createStore(dbName, 'cache');
  }

  async load(): Promise<CachedState | undefined> {
    return validCachedState(await get(this.key, this.store));
  }

  async save(state: CachedState): Promise<void> {
    await set(this.key, state, this.store);
  }

  async clear(): Promise<void> {
    await del(this.key, this.store);
  }
}
