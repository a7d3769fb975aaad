import { RedpointClient, type ConversationView, type RedpointState } from '@redpoint/client';
import { IndexedDbCache } from '@redpoint/client/idb';
import { msgpack } from '@redpoint/client/msgpack';
import { shareTabs } from '@redpoint/client/tabs';
import { devToken } from './api.js';
import { setupDevPanel } from './dev-panel.js';
import { setupResetNotice } from './reset-notice.js';
import { StatusLine } from './status-line.js';
import { render, type Action } from './view.js';

/**
 * The demo page: one user (`?uid=`, default alice) on one device (`?device=`). Counts come from
 * the SDK; the cache is IndexedDB, so a reload without a server shows the last known counts.
 * Tabs of one user in this browser share one WebSocket (`?share=0`: each tab its own);
 * `?binary=0`: JSON frames instead of MessagePack.
 */
const params = new URLSearchParams(location.search);
const uid = params.get('uid') || 'alice';
const device = params.get('device') || Math.random().toString(36).slice(2, 6).toUpperCase();

const client = new RedpointClient({
  url: `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/ws`,
  token: () => devToken(uid),
  cache: new IndexedDbCache(`user:${uid}`),
  ...(params.get('binary') !== '0' ? { codec: msgpack } : {}),
  ...(params.get('share') !== '0' ? { transport: shareTabs({ key: `user:${uid}` }) } : {}),
  device,
  backoff: { baseMs: 300, maxMs: 5000 },
});

const logEl = document.getElementById('log');
if (!logEl) throw new Error('#log missing from index.html');
const log = new StatusLine(logEl);
setupResetNotice(client);

/** Most recently active first: a conversation moves up when its newest message changes. */
const activity = new Map<string, number>();
const lastSeen = new Map<string, number>();
let tick = 0;
const order = (a: ConversationView, b: ConversationView): number => (activity.get(b.conv) ?? 0) - (activity.get(a.conv) ?? 0) || (a.conv < b.conv ? -1 : 1);

/**
 * When each conversation's shown count last changed (ms since epoch): read by the browser test.
 * No prototype: conversation ids such as `__proto__` are keys.
 */
const shownAt: Record<string, { unread: number; at: number }> = Object.create(null) as Record<string, { unread: number; at: number }>;
let staleSince: number | null = null;
let scheduled = false;
const refreshOptions = setupDevPanel(client, uid, log);

function paint(): void {
  scheduled = false;
  const state: RedpointState = client.state;
  for (const c of state.conversations) {
    if (lastSeen.get(c.conv) !== c.lastSeq) {
      if (lastSeen.has(c.conv)) activity.set(c.conv, ++tick);
      lastSeen.set(c.conv, c.lastSeq);
    }
  }
  staleSince = state.stale ? (staleSince ?? Date.now()) : null;
  render(state, order, uid, device, staleSince);
  log.connection(state.connection === 'open' && !state.stale);
  const now = Date.now();
  for (const c of state.conversations) {
    if (shownAt[c.conv]?.unread !== c.unread) shownAt[c.conv] = { unread: c.unread, at: now };
  }
  refreshOptions();
}

client.on('change', () => {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(paint);
});
client.on('error', (err) => console.warn('[redpoint]', err.message));

document.getElementById('conversations')?.addEventListener('click', (event) => {
  const button = (event.target as HTMLElement).closest<HTMLButtonElement>('button[data-action]');
  const conv = button?.dataset.conv;
  if (!button || !conv) return;
  const action = button.dataset.action as Action;
  const done = (p: Promise<void>, what: string): void => {
    p.then(
      () => log.info(`${what} ${conv}`),
      (err: unknown) => log.error(`Failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  };
  if (action === 'read') client.markRead(conv);
  else if (action === 'mute') done(client.mute(conv, true), 'Muted');
  else if (action === 'unmute') done(client.mute(conv, false), 'Unmuted');
  else if (action === 'mark-unread') done(client.markUnread(conv), 'Marked unread');
  else if (action === 'delete') done(client.deleteConversation(conv), 'Deleted');
});

Object.assign(window, { redpoint: { client, shownAt, uid, device } });
paint();
void client.start();
