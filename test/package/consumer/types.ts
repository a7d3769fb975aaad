// Type-checked against the installed package only (tsc --noEmit -p .): every entry's types
// resolve inside the package, and they are real types (each @ts-expect-error must be an error).

import {
  CLOSE_CODES,
  ClosedError,
  type ConversationView,
  MemoryCache,
  REQUEST_TIMEOUT_CLOSE,
  RedpointClient,
  type RedpointState,
  type SyncStatus,
  type Totals,
} from '@redpoint/client';
import { FileCache } from '@redpoint/client/file';
import { IndexedDbCache } from '@redpoint/client/idb';
import { msgpack } from '@redpoint/client/msgpack';
import { RedpointProvider, type Unread, useConversation, useUnread } from '@redpoint/client/react';
import { shareTabs } from '@redpoint/client/tabs';
import WebSocket from 'ws';

const client = new RedpointClient({
  url: 'ws://127.0.0.1:8080/v1/ws',
  token: async () => 'jwt',
  WebSocket,
  codec: msgpack,
  cache: new FileCache('/tmp/redpoint-cache.json'),
  requestTimeoutMs: 15_000,
});
const browserClient = new RedpointClient({
  url: 'wss://example.com/v1/ws',
  token: () => fetch('/token').then((r) => r.text()),
  cache: new IndexedDbCache('user:alice'),
  transport: shareTabs({ key: 'user:alice' }),
});
const other = new RedpointClient({ url: '', token: async () => '', cache: new MemoryCache() });

const state: RedpointState = client.state;
const status: SyncStatus = state.status;
const totals: Totals | null = state.totals;
const first: ConversationView | undefined = state.conversations[0];
const badge: number | undefined = totals?.categories['group'];
const unsubscribe: () => void = client.on('change', (s: RedpointState) => s.totals?.total);
const ready: Promise<void> = client.ready().catch((err: unknown) => {
  if (err instanceof ClosedError) {
    const code: number | undefined = err.closeCode;
    return void code;
  }
  throw err;
});
const codes: number[] = [CLOSE_CODES.unauthorized.code, REQUEST_TIMEOUT_CLOSE];
void [browserClient, other, status, first, badge, unsubscribe, ready, codes];

// @ts-expect-error: a codec is an object, not a name
new RedpointClient({ url: '', token: async () => '', codec: 'msgpack' });
// @ts-expect-error: the token is fetched, not given
new RedpointClient({ url: '', token: 'jwt' });
// @ts-expect-error: state is read-only data, not a method
client.state();

export function useBadge(): string {
  const unread: Unread = useUnread();
  const row = useConversation('dm');
  // @ts-expect-error: useConversation takes an id
  useConversation(1);
  return `${unread.totals?.total ?? '-'} ${row?.unread ?? '-'} ${String(RedpointProvider)}`;
}
