// The browser test's page, bundled from the installed package: one user's client sharing its
// socket with the other tabs (shareTabs), MessagePack frames, and React components on the hooks
// (a row per conversation, and its topics).
// Query: ?uid=<user>&ws=<WebSocket URL>&rows=<conv>,<conv>; the page's server mints tokens at /token?uid=.
import { childLabel, RedpointClient, type StatusEvent } from '@redpoint/client';
import { msgpack } from '@redpoint/client/msgpack';
import { RedpointProvider, useChildren, useConversation, useUnread } from '@redpoint/client/react';
import { shareTabs } from '@redpoint/client/tabs';
import { createElement as h, type ReactElement } from 'react';
import { createRoot } from 'react-dom/client';

const params = new URLSearchParams(location.search);
const uid = params.get('uid') ?? 'alice';
const rows = (params.get('rows') ?? 'dm,team').split(',');
const client = new RedpointClient({
  url: params.get('ws') ?? '',
  token: () => fetch(`/token?uid=${encodeURIComponent(uid)}`).then((r) => r.text()),
  codec: msgpack,
  transport: shareTabs({ key: `user:${uid}` }),
  backoff: { baseMs: 100, maxMs: 1000 },
  readBatchMs: 50,
});

/** Status events with the wall-clock time they happened (read by the test). */
const statuses: Array<StatusEvent & { at: number }> = [];
client.on('status', (e) => statuses.push({ ...e, at: Date.now() }));
/** Renders per component: a row must not re-render for another conversation's change. */
const renders = new Map<string, number>();
const rendered = (name: string): void => void renders.set(name, (renders.get(name) ?? 0) + 1);

function Badge(): ReactElement {
  rendered('badge');
  const { totals, stale } = useUnread();
  return h('p', { id: 'badge', 'data-stale': String(stale) }, totals ? String(totals.total) : '…');
}

function Row({ conv }: { conv: string }): ReactElement {
  rendered(conv);
  const view = useConversation(conv);
  return h('li', { id: `row-${conv}` }, view ? `${view.conv}: ${view.unread}` : `${conv}: -`);
}

/** A conversation's topics (its child rows), each with its own count. */
function Topics({ conv }: { conv: string }): ReactElement {
  rendered(`topics:${conv}`);
  const topics = useChildren(conv);
  return h('ul', { id: `topics-${conv}` }, ...topics.map((t) => h('li', { key: t.conv }, `${childLabel(t)}: ${t.unread}`)));
}

const root = document.getElementById('root');
if (!root) throw new Error('no #root');
createRoot(root).render(
  h(
    RedpointProvider,
    { client },
    h(Badge),
    h('ul', null, ...rows.map((conv) => h(Row, { conv, key: conv }))),
    ...rows.map((conv) => h(Topics, { conv, key: `topics:${conv}` })),
  ),
);
void client.start();
Object.assign(window, { rp: { client, statuses, renders: () => Object.fromEntries(renders) } });
