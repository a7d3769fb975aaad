import { type ConversationGroup, conversationGroups, type RedpointState } from '@redpoint/client';
import { type ListContext, listRows } from './chat-list.js';
import { conversationPane, type OpenConversation } from './conversation-pane.js';
import { byId, count, h } from './dom.js';
import { focusedKey } from './menu.js';

/** Rendering of the client state: plain DOM, one function per region, no framework. */

function connectionLabel(state: RedpointState): { key: string; text: string } {
  if (state.connection === 'closed') return { key: 'closed', text: 'Disconnected' };
  // The SDK stopped retrying: the token was refused again and again (not a network outage).
  if (state.connection === 'auth_failed') return { key: 'closed', text: 'Sign-in refused' };
  if (state.connection !== 'open') return { key: 'offline', text: state.connection === 'connecting' ? 'Connecting…' : 'Offline' };
  if (state.status === 'DIRTY' || state.stale) return { key: 'syncing', text: 'Syncing…' };
  return { key: 'live', text: 'Live' };
}

/** The bar, the stale banner, the totals and the tab title. */
function chrome(state: RedpointState, uid: string, device: string, staleSince: number | null): void {
  document.body.dataset.status = state.status;
  document.body.dataset.stale = String(state.stale);
  byId('who').textContent = `${uid} · device ${device}`;

  const conn = connectionLabel(state);
  byId('connection').dataset.state = conn.key;
  byId('connection-text').textContent = conn.text;

  const banner = byId('banner');
  banner.hidden = !(state.stale && state.totals);
  if (state.stale && state.totals) {
    const since = staleSince ? ` (since ${new Date(staleSince).toLocaleTimeString()})` : '';
    banner.textContent =
      state.connection === 'open'
        ? 'Catching up — showing the last known counts…'
        : state.connection === 'auth_failed'
          ? `Sign-in refused${since} — showing the last known counts. Reload to sign in again.`
          : `Not connected${since} — showing the last known counts. Reconnecting automatically…`;
  }

  const total = byId('total');
  const chips = byId('chips');
  if (!state.totals) {
    total.replaceChildren(h('span', {}, '—'));
    chips.replaceChildren();
    document.title = `Redpoint · ${uid}`;
    return;
  }
  const t = state.totals;
  total.replaceChildren(
    ...(t.mentions > 0 ? [h('span', { class: 'mention', title: 'Mentions' }, `@${t.mentions}`)] : []),
    t.total > 0 ? h('span', { class: 'pill', 'data-role': 'total' }, count(t.total)) : h('span', { 'data-role': 'total' }, 'All read'),
  );
  chips.replaceChildren(
    h('span', { class: 'chip' }, 'All ', h('b', {}, String(t.total))),
    ...Object.entries(t.categories).map(([cat, n]) => h('span', { class: 'chip', 'data-category': cat }, `${cat} `, h('b', {}, String(n)))),
  );
  document.title = `${t.total > 0 ? `(${count(t.total)}) ` : ''}Redpoint · ${uid}`;
}

export interface Screen {
  state: RedpointState;
  /** The list's order of its entries (a conversation with its topics is one). */
  order: (a: ConversationGroup, b: ConversationGroup) => number;
  device: string;
  staleSince: number | null;
  list: ListContext;
  open: OpenConversation | null;
}

/** Paints the whole page; the focus stays on what had it (the DOM under it is rebuilt). */
export function render(screen: Screen): void {
  const { state, list: ctx } = screen;
  const focus = focusedKey();
  chrome(state, ctx.uid, screen.device, screen.staleSince);

  // Topic rows go inside their conversation's entry (the SDK groups rows by `parent`).
  const sorted = state.totals ? conversationGroups(state.conversations, state.mutedMentions).sort(screen.order) : null;
  byId('conversations').replaceChildren(...listRows(sorted, ctx));
  byId('empty').hidden = !sorted || sorted.length > 0;

  const opened = screen.open && state.conversations.find((c) => c.conv === screen.open?.conv);
  const pane = byId('conversation');
  pane.hidden = !opened;
  byId('placeholder').hidden = Boolean(opened);
  document.body.dataset.view = opened ? 'conversation' : 'list';
  if (opened && screen.open) {
    pane.replaceChildren(...conversationPane(opened, screen.open, ctx));
    // Opened, or a message came: the newest message in view, as a messenger opens a chat.
    const shows = `${opened.conv}\n${opened.lastSeq}\n${ctx.messages(opened.conv).length}`;
    if (shows !== shownInPane) pane.lastElementChild?.scrollIntoView({ block: 'end' });
    shownInPane = shows;
  } else shownInPane = '';
  ctx.menus.settle(focus);
}

/** What the open conversation showed at the last paint: the pane scrolls to the newest message when it changes. */
let shownInPane = '';
