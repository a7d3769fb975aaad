import type { RedpointClient, RedpointState } from '../../client-demo/sdk/src/index.js';
import type { UnreadSummary } from '../../protocol/types.js';
import type { TestServer } from '../helpers/test-server.js';

/** Resolves with the first state that satisfies `predicate` (now or after a change); rejects on timeout. */
export function until(client: RedpointClient, predicate: (state: RedpointState) => boolean, what: string, timeoutMs = 5000): Promise<RedpointState> {
  return new Promise((resolve, reject) => {
    if (predicate(client.state)) return resolve(client.state);
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; state: ${JSON.stringify(client.state)}`));
    }, timeoutMs);
    const off = client.on('change', (state) => {
      if (!predicate(state)) return;
      clearTimeout(timer);
      off();
      resolve(state);
    });
  });
}

export const synced = (s: RedpointState): boolean => s.status === 'SYNCED' && !s.stale;

export function unreadOf(state: RedpointState, conv: string): number | undefined {
  return state.conversations.find((c) => c.conv === conv)?.unread;
}

/**
 * Waits until the client is SYNCED and shows exactly the server's unread summary. The server is
 * asked again after each change of the client (it may still be applying what the client sent);
 * between changes there is nothing new to compare, so it waits for the next one, not a timer.
 */
export function convergedTo(h: TestServer, client: RedpointClient, uid: string, timeoutMs = 5000): Promise<RedpointState> {
  return convergedWith(client, async () => truth(await h.unread(uid)), uid, timeoutMs);
}

/** `convergedTo` with the expected picture from `expected()` (asked again after each change). */
export async function convergedWith(client: RedpointClient, expected: () => Promise<Shown>, what: string, timeoutMs = 5000): Promise<RedpointState> {
  const deadline = Date.now() + timeoutMs;
  const left = (): number => Math.max(1, deadline - Date.now());
  let changes = 0;
  const off = client.on('change', () => changes++);
  try {
    for (;;) {
      await until(client, synced, `${what} synced`, left());
      // Counted before the fetch: a change while it is in flight sends us round again at once.
      const seen = changes;
      const wanted = JSON.stringify(await expected());
      // The state now, not the one before the fetch: that is what was compared.
      const state = client.state;
      const last = JSON.stringify(shown(state));
      if (synced(state) && last === wanted) return state;
      if (Date.now() > deadline) throw new Error(`${what} did not converge:\n client ${last}\n wanted ${wanted}`);
      await until(client, () => changes > seen, `a change of ${what}`, left()).catch(() => undefined);
    }
  } finally {
    off();
  }
}

type Shown = Pick<UnreadSummary, 'total' | 'mentions' | 'categories' | 'conversations'>;

/** What the client shows, in the shape of the server's unread summary, to compare the two. */
export function shown(state: RedpointState): Shown {
  if (!state.totals) throw new Error(`no totals yet (status ${state.status})`);
  return {
    total: state.totals.total,
    mentions: state.totals.mentions,
    categories: sortedKeys(state.totals.categories),
    conversations: state.conversations.map(({ pending: _pending, ...view }) => view),
  };
}

/** The server's summary in the SDK's list order: the newest last activity (`at`) first, then by id (the server lists by id). */
export function truth(summary: UnreadSummary): Shown {
  // Read receipts' peer positions are not part of the synced state the client shows (peerRead() has them);
  // the list is in the SDK's order (last activity, then id).
  const conversations = summary.conversations
    .map(({ peerReadSeq: _peer, ...view }) => view)
    .sort((a, b) => (b.at ?? 0) - (a.at ?? 0) || (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0));
  return { total: summary.total, mentions: summary.mentions, categories: sortedKeys(summary.categories), conversations };
}

/** Category totals compared as sets: the order of keys means nothing. */
function sortedKeys(record: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1)));
}
