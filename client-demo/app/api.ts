import type { MessageInput } from '../../protocol/schemas.js';

/** The page's calls to the server's HTTP API (dev mode only: the published dev API key). */
const apiKey = document.querySelector<HTMLMetaElement>('meta[name="redpoint-api-key"]')?.content ?? '';

async function call(method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  }).catch(() => {
    // fetch() says only "Failed to fetch" (a TypeError) when nothing answered.
    throw new Error('the server is unreachable');
  });
  const data = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
  if (!res.ok) throw new Error(data.error?.message ?? `${method} ${path}: HTTP ${res.status}`);
  return data;
}

/** A dev token for `uid`, minted by the server (`POST /dev/token`, dev mode only). */
export async function devToken(uid: string): Promise<string> {
  return ((await call('POST', '/dev/token', { uid })) as { token: string }).token;
}

export function createConversation(conv: string, members: string[], category: string): Promise<unknown> {
  return call('PUT', `/v1/conversations/${encodeURIComponent(conv)}/members`, { add: members, category });
}

export function sendMessages(messages: MessageInput[]): Promise<unknown> {
  return call('POST', '/v1/messages', { messages });
}

export function setServerSettings(uid: string, conv: string, settings: { muted?: boolean; markedUnread?: boolean }): Promise<unknown> {
  return call('PUT', `/v1/users/${encodeURIComponent(uid)}/conversations/${encodeURIComponent(conv)}`, settings);
}

/** A message the test tools sent, as the dev entry keeps it for every device (Redpoint keeps no text). */
export interface SentMessage {
  seq: number;
  sender: string;
  text: string;
  mention: boolean;
  /** When it was sent (ms since the epoch). */
  at: number;
}

/** The demo's shared record (dev entry only): when each conversation was last active, and what the tools sent to it. */
export interface ActivityRecord {
  activity: Record<string, number>;
  messages: Record<string, SentMessage[]>;
}

export async function getActivity(): Promise<ActivityRecord> {
  return (await call('GET', '/demo/activity')) as ActivityRecord;
}

/** This device saw `conv` reach `seq`; with `messages`, the tools sent those (`agoMs`: how long ago). */
export async function reportActivity(conv: string, seq: number, messages?: Array<Omit<SentMessage, 'at'> & { agoMs: number }>): Promise<ActivityRecord> {
  return (await call('POST', '/demo/activity', { conv, seq, ...(messages ? { messages } : {}) })) as ActivityRecord;
}

/** Up to 100 members of a conversation (the operator's inspection; the page holds the dev API key). */
export async function membersOf(conv: string): Promise<string[]> {
  const found = (await call('GET', `/v1/admin/conversations/${encodeURIComponent(conv)}`)) as { members: Array<{ uid: string }> };
  return found.members.map((m) => m.uid);
}
