/**
 * Redpoint client SDK (browser and Node). Separate entries, so that a bundle carries only what it
 * uses: `@redpoint/client/msgpack` (MessagePack frames), `@redpoint/client/tabs` (one socket per
 * browser), `@redpoint/client/react` (hooks), `@redpoint/client/idb` (IndexedDB cache, browser),
 * `@redpoint/client/file` (file cache, Node).
 */

export { CLOSE_CODES, type CloseReason } from '../../../protocol/close-codes.js';
export { AuthError } from './auth-error.js';
export { Backoff, DEFAULT_BACKOFF } from './backoff.js';
export type { CacheAdapter, CachedState } from './cache/cache.js';
export { MemoryCache } from './cache/memory.js';
export { RedpointClient } from './client.js';
export { type FrameCodec, jsonCodec, type WireFrame } from './codec.js';
export { REQUEST_TIMEOUT_CLOSE } from './connection.js';
export { type ConversationGroup, childLabel, childrenOf, conversationGroups, groupOf, isChild } from './groups.js';
export { ClosedError } from './publisher.js';
export type { Timers } from './timers.js';
export type { FrameSocket, SocketEvents, Transport, TransportContext, TransportFactory, WebSocketConstructor, WebSocketLike } from './transport.js';
export { webSocketTransport } from './transport.js';
export type {
  BackoffOptions,
  ClientOptions,
  ConnectionState,
  ConversationView,
  RedpointEvents,
  RedpointState,
  ResetEvent,
  StatusEvent,
  SyncStatus,
  Totals,
} from './types.js';
export type { ConvState, ConvView, Cursor } from './wire-types.js';
