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

export type Action = 'read' | 'mute' | 'unmute' | 'mark-unread' | 'delete';

function row(c: ConversationView): HTMLElement {
  const action = (name: Action, label: string, extra = ''): HTMLElement =>
    h('button', { class: `btn small ${extra}`.trim(), 'data-action': name, 'data-conv': c.conv, type: 'button' }, label);
  const classes = ['conv', c.muted ? 'is-muted' : '', c.pending ? 'is-pending' : ''].filter(Boolean).join(' ');
  // Four grid cells (avatar, text, marks, actions): styles.css places them per screen width.
  return h(
    'li',
    { class: classes, 'data-conv': c.conv, 'data-unread': String(c.unread) },
    h('div', { class: 'avatar', 'aria-hidden': 'true', style: `background:${colorOf(c.conv)}` }, initials(c.conv)),
    h(
      'div',
      { class: 'conv-main' },
      h(
        'div',
        { class: 'conv-title' },
        h('span', { class: 'conv-name', 'data-role': 'name', title: c.conv }, c.conv),
        c.muted ? h('span', { class: 'tag', 'data-role': 'muted' }, 'muted') : null,
      ),
      h('div', { class: 'conv-sub', 'data-role': 'sub' }, `${c.category} · message #${c.lastSeq}`),
    ),
    marks(c),
    h(
      'div',
      { class: 'actions' },
      action('read', 'Read'),
      c.muted ? action('unmute', 'Unmute') : action('mute', 'Mute'),
      action('mark-unread', 'Unread'),
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
  list.replaceChildren(...sorted.map(row));
  empty.hidden = sorted.length > 0;
}
