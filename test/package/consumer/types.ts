// Type-checked against the installed package only (tsc --noEmit -p .): every entry's types
// resolve inside the package, and they are real types (each @ts-expect-error must be an error).

import {
  CLOSE_CODES,
  ClosedError,
  type ConversationGroup,
  type ConversationView,
  childLabel,
  childrenOf,
  conversationGroups,
  groupOf,
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
import { RedpointProvider, type Unread, useChildren, useConversation, useConversationGroup, useConversationList, useUnread } from '@redpoint/client/react';
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
// Topics: child rows name their conversation; the list helpers group them.
const parent: string | undefined = first?.parent;
const topic: string | undefined = first?.topic;
const entries: ConversationGroup[] = conversationGroups(state.conversations);
const summed: number | undefined = groupOf(state.conversations, 'team')?.unread;
const labels: string[] = childrenOf(state.conversations, 'team').map(childLabel);
void [browserClient, other, status, first, badge, unsubscribe, ready, codes, parent, topic, entries, summed, labels];

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
  const topics: ConversationView[] = useChildren('team');
  const team: ConversationGroup | undefined = useConversationGroup('team');
  const list: ConversationGroup[] = useConversationList();
  // @ts-expect-error: useChildren takes an id
  useChildren(1);
  return `${unread.totals?.total ?? '-'} ${row?.unread ?? '-'} ${topics.length} ${team?.mentions ?? '-'} ${list.length} ${String(RedpointProvider)}`;
}
