import type { ConversationView, RedpointState } from '@redpoint/client';

/** Rendering of the client state: plain DOM, one function per region, no framework. */

type Attrs = Record<string, string | boolean | undefined>;

function h(tag: string, attrs: Attrs = {}, ...children: Array<Node | string | null>): HTMLElement {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (key === 'class') el.className = String(value);
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children) if (child !== null) el.append(child);
  return el;
}

const byId = (id: string): HTMLElement => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} missing from index.html`);
  return el;
};

const COLORS = ['#6366f1', '#0ea5e9', '#10b981', '#f59e0b', '#ec4899', '#8b5cf6', '#14b8a6', '#f97316'];

function colorOf(name: string): string {
  let hash = 0;
  for (const ch of name) hash = (hash * 31 + ch.charCodeAt(0)) >>> 0;
  return COLORS[hash % COLORS.length] ?? COLORS[0] ?? '#6366f1';
}

function initials(name: string): string {
  const parts = name.split(/[-_.:@\s]+/).filter(Boolean);
  return ((parts[0]?.[0] ?? '?') + (parts[1]?.[0] ?? '')).toUpperCase();
}

const count = (n: number): string => (n > 99 ? '99+' : String(n));

/** The marks on the right of a row: the mentions (@2), the number, or the "marked unread" dot. */
function marks(c: ConversationView): HTMLElement {
  const box = h('div', { class: 'marks' });
  if (c.mentions > 0) {
    box.append(
      h('span', { class: 'mention', 'data-role': 'mention', title: `${c.mentions} mention${c.mentions === 1 ? '' : 's'} of you` }, `@${count(c.mentions)}`),
    );
  }
  if (c.unread > 0) box.append(h('span', { class: `pill${c.muted ? ' muted' : ''}`, 'data-role': 'unread' }, count(c.unread)));
  else if (c.markedUnread) box.append(h('span', { class: `dot${c.muted ? ' muted' : ''}`, 'data-role': 'marked', title: 'Marked as unread' }));
  return box;
}

export type Action = 'read' | 'mute' | 'unmute' | 'mark-unread' | 'delete' | 'menu';

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

const CATEGORY_LABELS: Record<string, string> = { private: 'Private chat', group: 'Group', system: 'System' };

/** The line under the name, as a chat list reads: what is new, or that nothing is. */
function subtitle(c: ConversationView): string {
  const kind = CATEGORY_LABELS[c.category] ?? c.category;
  let news: string;
  if (c.mentions > 0) news = `${c.mentions === 1 ? 'You were mentioned' : `${c.mentions} mentions of you`} · ${c.unread} new`;
  else if (c.unread > 0) news = `${c.unread} new message${c.unread === 1 ? '' : 's'}`;
  else if (c.markedUnread) news = 'Marked as unread';
  else news = 'No new messages';
  return `${kind} · ${news}`;
}

function row(c: ConversationView, uid: string): HTMLElement {
  const action = (name: Action, label: string, extra = ''): HTMLElement =>
    h('button', { class: `btn small ${extra}`.trim(), 'data-action': name, 'data-conv': c.conv, type: 'button' }, label);
  const classes = ['conv', c.muted ? 'is-muted' : '', c.pending ? 'is-pending' : ''].filter(Boolean).join(' ');
  const name = displayName(c.conv, uid);
  // One toggle: what is unread (or marked) can be marked read, what is read can be marked unread.
  const unreadish = c.unread > 0 || c.markedUnread;
  // Five grid cells (avatar, text, marks, the phone's menu button, actions): styles.css places them per screen width.
  return h(
    'li',
    { class: classes, 'data-conv': c.conv, 'data-unread': String(c.unread) },
    h('div', { class: 'avatar', 'aria-hidden': 'true', style: `background:${colorOf(name)}` }, initials(name)),
    h(
      'div',
      { class: 'conv-main' },
      h(
        'div',
        { class: 'conv-title' },
        h('span', { class: 'conv-name', 'data-role': 'name', title: c.conv }, name),
        c.muted ? h('span', { class: 'tag', 'data-role': 'muted' }, 'muted') : null,
      ),
      h('div', { class: 'conv-sub', 'data-role': 'sub' }, subtitle(c)),
    ),
    marks(c),
    h(
      'button',
      {
        class: 'btn small menu-btn',
        'data-action': 'menu',
        'data-conv': c.conv,
        type: 'button',
        'aria-label': `Actions for ${name}`,
        'aria-expanded': 'false',
      },
      '⋯',
    ),
    h(
      'div',
      { class: 'actions', 'data-role': 'actions' },
      unreadish ? action('read', 'Mark as read') : action('mark-unread', 'Mark as unread'),
      c.muted ? action('unmute', 'Unmute') : action('mute', 'Mute'),
      action('delete', 'Delete', 'danger'),
    ),
  );
}

function skeleton(): HTMLElement {
  return h(
    'li',
    { class: 'conv skeleton' },
    h('div', { class: 'avatar' }),
    h('div', { class: 'conv-main' }, h('div', { class: 'bar' }), h('div', { class: 'bar short' })),
  );
}

function connectionLabel(state: RedpointState): { key: string; text: string } {
  if (state.connection === 'closed') return { key: 'closed', text: 'Disconnected' };
  if (state.connection !== 'open') return { key: 'offline', text: state.connection === 'connecting' ? 'Connecting…' : 'Offline' };
  if (state.status === 'DIRTY' || state.stale) return { key: 'syncing', text: 'Syncing…' };
  return { key: 'live', text: 'Live' };
}

export function render(
  state: RedpointState,
  order: (a: ConversationView, b: ConversationView) => number,
  uid: string,
  device: string,
  staleSince: number | null,
): void {
  document.body.dataset.status = state.status;
  document.body.dataset.stale = String(state.stale);
  byId('who').textContent = `${uid} · device ${device}`;

  const conn = connectionLabel(state);
  const connEl = byId('connection');
  connEl.dataset.state = conn.key;
  byId('connection-text').textContent = conn.text;

  const banner = byId('banner');
  banner.hidden = !(state.stale && state.totals);
  if (state.stale && state.totals) {
    const since = staleSince ? ` (since ${new Date(staleSince).toLocaleTimeString()})` : '';
    banner.textContent =
      state.connection === 'open'
        ? 'Catching up — showing the last known counts…'
        : `Not connected${since} — showing the last known counts. Reconnecting automatically…`;
  }

  const total = byId('total');
  const chips = byId('chips');
  if (!state.totals) {
    total.replaceChildren(h('span', {}, '—'));
    chips.replaceChildren();
    document.title = `Redpoint · ${uid}`;
  } else {
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

  const list = byId('conversations');
  const empty = byId('empty');
  if (!state.totals) {
    list.replaceChildren(skeleton(), skeleton(), skeleton());
    empty.hidden = true;
    return;
  }
  const sorted = [...state.conversations].sort(order);
  // The row whose menu is open on a phone stays open across repaints.
  const open = list.querySelector<HTMLElement>('li.conv.open')?.dataset.conv;
  list.replaceChildren(...sorted.map((c) => row(c, uid)));
  if (open !== undefined) setMenu(list, open, true);
  empty.hidden = sorted.length > 0;
}

/** Opens (or closes) the actions of one row on a phone; at most one is open. */
export function setMenu(list: HTMLElement, conv: string, open: boolean): void {
  for (const li of list.querySelectorAll<HTMLElement>('li.conv')) {
    const mine = li.dataset.conv === conv && open;
    li.classList.toggle('open', mine);
    li.querySelector('.menu-btn')?.setAttribute('aria-expanded', String(mine));
  }
}
