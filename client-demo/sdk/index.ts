/**
 * Redpoint client SDK (browser and Node). Caches: `MemoryCache` here; `IndexedDbCache` from
 * `./cache/indexeddb.js` (browser) and `FileCache` from `./cache/file.js` (Node) are separate
 * entry points so neither platform bundles the other's storage.
 */
export { RedpointClient } from './client.js';
export { Backoff, DEFAULT_BACKOFF } from './backoff.js';
export { MemoryCache } from './cache/memory.js';
export type { CacheAdapter, CachedState } from './cache/cache.js';
export type { Timers } from './timers.js';
export type { WebSocketConstructor, WebSocketLike } from './socket.js';
export type {
  BackoffOptions,
  ClientOptions,
  ConnectionState,
  ConversationView,
  RedpointEvents,
  RedpointState,
  StatusEvent,
  SyncStatus,
  Totals,
} from './types.js';
