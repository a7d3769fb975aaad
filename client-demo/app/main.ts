import { type ConversationView, RedpointClient, type RedpointState } from '@redpoint/client';
import { IndexedDbCache } from '@redpoint/client/idb';
import { msgpack } from '@redpoint/client/msgpack';
import { shareTabs } from '@redpoint/client/tabs';
import { devToken, getActivity, reportActivity } from './api.js';
import { setupDevPanel } from './dev-panel.js';
import { setupResetNotice } from './reset-notice.js';
import { StatusLine } from './status-line.js';
import { type Action, render, setMenu } from './view.js';

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
  // The demo wants a dead socket shown soon (the SDK's default waits past the server's 120 s version frame).
  heartbeatMs: 20_000,
});

const logEl = document.getElementById('log');
if (!logEl) throw new Error('#log missing from index.html');
const log = new StatusLine(logEl);
setupResetNotice(client);

/**
 * One order on every device: most recently active first, then by id. The times come from the
 * dev server's shared record (client-demo/demo-activity.ts): each device reports the newest
 * message it sees arrive, and all of them sort by the same stamps.
 */
let activity: Record<string, number> = Object.create(null) as Record<string, number>;
const lastSeen = new Map<string, number>();
const order = (a: ConversationView, b: ConversationView): number => (activity[b.conv] ?? 0) - (activity[a.conv] ?? 0) || (a.conv < b.conv ? -1 : 1);
const adopt = (record: Record<string, number>): void => {
  activity = Object.assign(Object.create(null) as Record<string, number>, record);
  if (!scheduled) {
    scheduled = true;
    requestAnimationFrame(paint);
  }
};
const fetchActivity = (): void => {
  getActivity().then(adopt, (err: unknown) => console.warn('[demo] activity', err));
};

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
    const before = lastSeen.get(c.conv);
    if (before === c.lastSeq) continue;
    // A newer message arrived while this page watched: report it (the reply is the shared record).
    if (before !== undefined && c.lastSeq > before) reportActivity(c.conv, c.lastSeq).then(adopt, (err: unknown) => console.warn('[demo] activity', err));
    lastSeen.set(c.conv, c.lastSeq);
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

const list = document.getElementById('conversations');
list?.addEventListener('click', (event) => {
  const button = (event.target as HTMLElement).closest<HTMLButtonElement>('button[data-action]');
  const conv = button?.dataset.conv;
  if (!button || !conv) return;
  const action = button.dataset.action as Action;
  // On a phone the row's actions sit behind one control; any action closes it again.
  if (list) setMenu(list, conv, action === 'menu' && !button.closest('li')?.classList.contains('open'));
  if (action === 'menu') return;
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

Object.assign(window, {
  redpoint: {
    client,
    shownAt,
    uid,
    device,
    order: () =>
      client.state.conversations
        .slice()
        .sort(order)
        .map((c) => c.conv),
  },
});
paint();
fetchActivity();
void client.start();
