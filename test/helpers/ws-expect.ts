import { expect } from 'vitest';
import type { ChangeFrame, ErrorFrame, HeadFrame, ServerFrame } from '../../protocol/frames.js';
import type { UnreadSummary } from '../../protocol/types.js';
import type { TestServer } from './test-server.js';
import type { WsClient } from './ws-client.js';

/** Frame predicates for `waitFrame`. */
export const isChange =
  (conv: string, check: (f: ChangeFrame) => boolean = () => true) =>
  (f: ServerFrame): f is ChangeFrame =>
    f.t === 'change' && f.conv === conv && check(f);

export const isHead =
  (conv: string, lastSeq?: number) =>
  (f: ServerFrame): f is HeadFrame =>
    f.t === 'head' && f.conv === conv && (lastSeq === undefined || f.lastSeq === lastSeq);

export const isError =
  (code?: string) =>
  (f: ServerFrame): f is ErrorFrame =>
    f.t === 'error' && (code === undefined || f.code === code);

/** What must agree between a client and GET unread: cursor, conversations, totals (zero categories aside). */
export function comparable(s: UnreadSummary): object {
  return {
    epoch: s.epoch,
    version: s.version,
    total: s.total,
    mentions: s.mentions,
    categories: Object.fromEntries(Object.entries(s.categories).filter(([, n]) => n !== 0)),
    // Read receipts' peer positions are read beside the stream, not part of a client's copy of it.
    conversations: s.conversations.map(({ peerReadSeq: _peer, ...view }) => view),
  };
}

/** The client's state and totals equal the server's (GET /v1/users/:uid/unread), now. */
export async function expectMatchesServer(client: WsClient, server: Pick<TestServer, 'unread'>, label = ''): Promise<UnreadSummary> {
  const uid = client.uid;
  const got = await server.unread(uid);
  expect(client.violations, `${label} protocol violations seen by ${uid}`).toEqual([]);
  expect(comparable(client.summary()), `${label} client of ${uid} vs GET unread`).toEqual(comparable(got));
  return got;
}

/**
 * Waits until the client shows what the server has, by events only: each time a frame arrives the
 * comparison is redone. Fails after `timeoutMs` with the last difference.
 */
export async function waitMatchesServer(client: WsClient, server: Pick<TestServer, 'unread'>, timeoutMs = 5000, label = ''): Promise<UnreadSummary> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // Marked before the fetch: a frame arriving during it sends us round again at once.
    const seen = client.mark();
    const got = await server.unread(client.uid);
    if (client.cursor && JSON.stringify(comparable(client.summary())) === JSON.stringify(comparable(got))) {
      expect(client.violations, `${label} protocol violations`).toEqual([]);
      return got;
    }
    const left = deadline - Date.now();
    // Out of time, or closed (nothing more can arrive): the difference now is the final one.
    if (left <= 0 || client.closeInfo) {
      const closed = client.closeInfo ? ` (socket closed: ${JSON.stringify(client.closeInfo)})` : '';
      expect(comparable(client.summary()), `${label} client of ${client.uid} never matched GET unread${closed}`).toEqual(comparable(got));
      return got;
    }
    // Something must arrive for the client to change: wait for the next frame (or the deadline).
    await client.waitFor(() => client.mark() > seen, left, 'a frame').catch(() => undefined);
  }
}
