import { createContext, createElement, type ReactElement, type ReactNode, useContext, useRef, useSyncExternalStore } from 'react';
import type { RedpointClient } from './client.js';
import { type ConversationGroup, childrenOf, conversationGroups, groupOf } from './groups.js';
import { same } from './same.js';
import type { ConversationView, RedpointState, SyncStatus, Totals } from './types.js';

/**
 * React bindings: `<RedpointProvider client={client}>` once near the root, then `useUnread()` for
 * the badge, `useConversation(conv)` for one row, `useConversationList()` for the list's entries
 * (child rows inside their conversation) and `useChildren(conv)` for a conversation's topics and
 * threads. Built on `useSyncExternalStore`, so every
 * component sees the same state in a render (no tearing), and a component re-renders only when
 * what it reads changed.
 */
const ClientContext = createContext<RedpointClient | null>(null);

export interface RedpointProviderProps {
  client: RedpointClient;
  children?: ReactNode;
}

export function RedpointProvider({ client, children }: RedpointProviderProps): ReactElement {
  return createElement(ClientContext.Provider, { value: client }, children);
}

/** The client of the nearest `RedpointProvider`. */
export function useRedpointClient(): RedpointClient {
  const client = useContext(ClientContext);
  if (!client) throw new Error('Redpoint hooks need a <RedpointProvider client={client}> above the component');
  return client;
}

/** The whole client state; re-renders on every change. */
export function useRedpointState(): RedpointState {
  const client = useRedpointClient();
  const snapshot = (): RedpointState => client.state;
  return useSyncExternalStore(client.subscribe, snapshot, snapshot);
}

export interface Unread {
  status: SyncStatus;
  /** The numbers may be out of date (cache, or before a disconnect): show them, marked as such. */
  stale: boolean;
  /** null while NO_DATA: render a placeholder, never a 0. */
  totals: Totals | null;
}

/** The badge: totals (all, mentions, per category) with the status behind them. */
export function useUnread(): Unread {
  return useSelected((s) => ({ status: s.status, stale: s.stale, totals: s.totals }));
}

/** One conversation as shown (undefined: not known, hidden or left). */
export function useConversation(conv: string): ConversationView | undefined {
  return useSelected((s) => s.conversations.find((c) => c.conv === conv));
}

/**
 * The list's top level: one entry per conversation, its child rows (topics, threads) inside it
 * with the summed counts; the newest activity first.
 */
export function useConversationList(): ConversationGroup[] {
  return useSelected((s) => conversationGroups(s.conversations, s.mutedMentions));
}

/** `conv` with its child rows and their summed unread and mentions (undefined: none of them visible). */
export function useConversationGroup(conv: string): ConversationGroup | undefined {
  return useSelected((s) => groupOf(s.conversations, conv, s.mutedMentions));
}

/** The visible child rows of `conv` (its topics and threads), the newest activity first. */
export function useChildren(conv: string): ConversationView[] {
  return useSelected((s) => childrenOf(s.conversations, conv));
}

/**
 * `select(client.state)`, kept as the same object while its content is the same: the snapshot
 * `useSyncExternalStore` needs, and no re-render when another part of the state changed.
 */
function useSelected<T>(select: (state: RedpointState) => T): T {
  const client = useRedpointClient();
  const last = useRef<{ value: T } | null>(null);
  const snapshot = (): T => {
    const next = select(client.state);
    if (last.current && same(last.current.value, next)) return last.current.value;
    last.current = { value: next };
    return next;
  };
  return useSyncExternalStore(client.subscribe, snapshot, snapshot);
}
