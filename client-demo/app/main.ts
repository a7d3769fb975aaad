import { conversationGroups, groupOf, RedpointClient, type RedpointState } from '@redpoint/client';
import { IndexedDbCache } from '@redpoint/client/idb';
import { msgpack } from '@redpoint/client/msgpack';
import { shareTabs } from '@redpoint/client/tabs';
import { Activity } from './activity.js';
import { devToken } from './api.js';
import { LEVELS, type ListContext } from './chat-list.js';
import type { OpenConversation } from './conversation-pane.js';
import { setupDevPanel } from './dev-panel.js';
import { Menus } from './menu.js';
import { Outbox, type Outgoing, targetOf } from './outbox.js';
import { PressHold } from './press-hold.js';
import { setupPushBadge } from './push-badge.js';
import { setupResetNotice } from './reset-notice.js';
import { StatusLine } from './status-line.js';
import { setupTools } from './tools.js';
import { render } from './view.js';

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
const pushBadgeEl = document.getElementById('push-badge');
if (pushBadgeEl) setupPushBadge(uid, pushBadgeEl);

let scheduled = false;
const schedule = (): void => {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(paint);
};
const activity = new Activity(schedule);
const menus = new Menus(schedule);
const pressHold = new PressHold(schedule);
const tools = setupTools();

const LEVEL_VALUES = LEVELS.map((l) => l.level);

/** The open conversation, and the lastSeq up to which this page has read it (or left it marked unread). */
let open: (OpenConversation & { readTo: number }) | null = null;

/**
 * When each conversation's shown count last changed (ms since epoch): read by the browser test.
 * No prototype: conversation ids such as `__proto__` are keys.
 */
const shownAt: Record<string, { unread: number; at: number }> = Object.create(null) as Record<string, { unread: number; at: number }>;
let staleSince: number | null = null;
const outbox = new Outbox(client, uid, activity);
const refreshOptions = setupDevPanel(client, uid, log, outbox);

/** A conversation on screen is read, as in any messenger: on opening, and as new messages arrive while it shows. */
function readOpen(state: RedpointState): void {
  if (!open) return;
  const c = state.conversations.find((v) => v.conv === open?.conv);
  if (!c) {
    open = null;
    return;
  }
  if (c.lastSeq > open.readTo && c.unread > 0 && document.visibilityState === 'visible') {
    open.readTo = c.lastSeq;
    client.markRead(c.conv);
  }
}

function paint(): void {
  scheduled = false;
  if (pressHold.holds()) return;
  const state: RedpointState = client.state;
  activity.watch(state);
  readOpen(state);
  staleSince = state.stale ? (staleSince ?? Date.now()) : null;
  const list: ListContext = {
    uid,
    now: Date.now(),
    open: open?.conv ?? null,
    menus,
    at: (c) => activity.at(c),
    entryAt: (g) => activity.entryAt(g),
    messages: (c) => activity.messages(c),
    peerRead: (c) => client.peerRead(c),
    readBy: (c, seq) => client.readBy(c, seq),
  };
  render({ state, order: activity.order, device, staleSince, list, open });
  log.connection(state.connection === 'open' && !state.stale);
  const now = Date.now();
  for (const c of state.conversations) {
    if (shownAt[c.conv]?.unread !== c.unread) shownAt[c.conv] = { unread: c.unread, at: now };
  }
  refreshOptions();
}

function openConversation(conv: string): void {
  const c = client.state.conversations.find((v) => v.conv === conv);
  if (!c) return;
  open = { conv, readAtOpen: c.readSeq, readTo: c.lastSeq };
  // Opening reads it, a "marked unread" dot included.
  if (c.unread > 0 || c.markedUnread) client.markRead(conv);
  menus.close(false);
  schedule();
}

client.on('change', schedule);
client.on('receipts', schedule);
client.on('error', (err) => console.warn('[redpoint]', err.message));
document.addEventListener('visibilitychange', schedule);
// Relative times ("5 min") move on by themselves.
setInterval(schedule, 30_000);

document.addEventListener('click', (event) => {
  const button = (event.target as HTMLElement).closest<HTMLButtonElement>('button[data-action]');
  const action = button?.dataset.action;
  if (!button || !action) {
    // A click anywhere else closes an open menu.
    if (!(event.target as HTMLElement).closest('[role="menu"]')) menus.close(false);
    return;
  }
  const conv = button.dataset.conv;
  if (action === 'back') {
    open = null;
    schedule();
    return;
  }
  if (!conv) return;
  if (action === 'menu') return menus.toggle(button.dataset.menu ?? '');
  if (action === 'open') return openConversation(conv);
  menus.close(true);
  const done = (p: Promise<unknown>, what: string): void => {
    p.then(
      () => log.info(`${what} ${conv}`),
      (err: unknown) => log.error(`Failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  };
  if (action === 'read') client.markRead(conv);
  else if (action === 'read-all') {
    // A conversation listed with its topics: each row is read on its own (PROTOCOL.md "Topics").
    const group = groupOf(client.state.conversations, conv, client.state.mutedMentions);
    for (const row of group ? [...(group.view ? [group.view] : []), ...group.children] : []) client.markRead(row.conv);
  } else if (action === 'level') {
    const level = LEVEL_VALUES.find((l) => l === button.dataset.value);
    if (level) done(client.setLevel(conv, level), `Notifications: ${LEVELS.find((l) => l.level === level)?.label} for`);
  } else if (action === 'recall' || action === 'react') {
    // As the message service would report it: a message of its own that does not count (PROTOCOL.md "What counts").
    const seq = Number(button.dataset.seq);
    const outgoing: Outgoing =
      action === 'recall'
        ? { sender: uid, text: '', mention: false, agoMs: 0, kind: 'recall', recalls: seq }
        : { sender: uid, text: '👍', mention: false, agoMs: 0, kind: 'reaction' };
    const shown = client.conversation(conv);
    done(outbox.send(shown ? targetOf(shown) : { conv }, [outgoing]), action === 'recall' ? `Recalled #${seq} in` : `Reacted to #${seq} in`);
  } else if (action === 'mark-unread') {
    // Marked unread while open: it stays so until a new message comes (no read on the next paint).
    if (open?.conv === conv) open.readTo = client.lastSeq(conv);
    done(client.markUnread(conv), 'Marked unread');
  } else if (action === 'unread-from') {
    const seq = Number(button.dataset.seq);
    // Unread from here while open: it stays so until a new message comes, and the divider moves there.
    if (open?.conv === conv) {
      open.readTo = client.lastSeq(conv);
      open.readAtOpen = seq - 1;
    }
    done(client.markUnreadFrom(conv, seq), `Marked unread from #${seq} in`);
  } else if (action === 'delete') {
    if (open?.conv === conv) open = null;
    done(client.deleteConversation(conv), 'Deleted');
  }
});

document.addEventListener('keydown', (event) => {
  menus.onKey(event);
  if (event.key !== 'Escape') return;
  if (menus.close(true)) return;
  if (tools.isOpen()) return tools.set(false);
});

Object.assign(window, {
  redpoint: {
    client,
    shownAt,
    uid,
    device,
    order: () =>
      conversationGroups(client.state.conversations, client.state.mutedMentions)
        .sort(activity.order)
        .map((g) => g.conv),
  },
});
paint();
activity.load();
void client.start();
