import type { UserInspection } from '../../protocol/admin-replies.js';
import type { DemoActivityReply, DemoKeptMessage } from '../../protocol/replies.js';
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

export async function getActivity(): Promise<DemoActivityReply> {
  return (await call('GET', '/demo/activity')) as DemoActivityReply;
}

/** This device saw `conv` reach `seq`; with `messages`, the tools sent those (`agoMs`: how long ago). */
export async function reportActivity(conv: string, seq: number, messages?: Array<Omit<DemoKeptMessage, 'at'> & { agoMs: number }>): Promise<DemoActivityReply> {
  return (await call('POST', '/demo/activity', { conv, seq, ...(messages ? { messages } : {}) })) as DemoActivityReply;
}

/** Up to 100 members of a conversation (the operator's inspection; the page holds the dev API key). */
export async function membersOf(conv: string): Promise<string[]> {
  const found = (await call('GET', `/v1/admin/conversations/${encodeURIComponent(conv)}`)) as { members: Array<{ uid: string }> };
  return found.members.map((m) => m.uid);
}

/**
 * The lastSeq of each of `uid`'s rows, hidden ones too (the operator's inspection): in a
 * conversation or topic the user is a member of, its head (effective, for a read-diffused one).
 */
export async function rowHeads(uid: string): Promise<Map<string, number>> {
  const inspection = (await call('GET', `/v1/admin/users/${encodeURIComponent(uid)}`)) as UserInspection;
  return new Map(inspection.conversations.filter((c) => c.status === 'member').map((c) => [c.conv, c.lastSeq]));
}
