import { type ConversationView, childLabel } from '@redpoint/client';

/** How a conversation is named and drawn: the other person of a private chat, initials, a colour. */

const COLORS = ['#6366f1', '#0ea5e9', '#10b981', '#f59e0b', '#ec4899', '#8b5cf6', '#14b8a6', '#f97316'];

export function colorOf(name: string): string {
  let hash = 0;
  for (const ch of name) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return COLORS[hash % COLORS.length] ?? COLORS[0] ?? '#6366f1';
}

export function initials(name: string): string {
  const parts = name.split(/[-_.:@\s]+/).filter(Boolean);
  return ((parts[0]?.[0] ?? '?') + (parts[1]?.[0] ?? '')).toUpperCase();
}

/**
 * The name a chat list shows: a private chat `dm:<a>:<b>` is named after the other person (the
 * same conversation is "bob" on alice's devices and "alice" on bob's), anything else by its id.
 */
export function displayName(conv: string, uid: string): string {
  const dm = /^dm:([^:]+):([^:]+)$/.exec(conv);
  if (!dm) return conv;
  const [, a = '', b = ''] = dm;
  return a === uid ? b : a;
}

/** A row's full name: a topic's is its conversation's and its own (`launch › design`). */
export function rowName(c: Pick<ConversationView, 'conv' | 'parent' | 'topic' | 'thread'>, uid: string): string {
  return c.parent === undefined ? displayName(c.conv, uid) : `${displayName(c.parent, uid)} › ${childLabel(c)}`;
}

export const CATEGORY_LABELS: Record<string, string> = { private: 'Private chat', group: 'Group', system: 'System' };
