import type { ConvState, Cursor, PullReply } from '../../protocol/types.js';
import { viewsOf } from '../helpers/sync-replica.js';
import type { TestServer } from '../helpers/test-server.js';
import type { ModelView } from './model.js';

/**
 * A client's local copy, rebuilt the way PROTOCOL.md says a client does it: a snapshot replaces
 * everything, entries are absolute states (null → drop), `more` → pull again from the version
 * reached, and views come from helpers/client-view.ts (PROTOCOL.md, not protocol/view.ts).
 */
export interface ClientCopy {
  cursor: Cursor | null;
  states: Map<string, ConvState>;
  heads: Record<string, number>;
  /** Issue 43: the read-diffused conversations' last activity and @all seqs of the last reply. */
  extras: Pick<PullReply, 'headAt' | 'mentionAll' | 'nocount'>;
  /** The user's setting `mutedMentions` as the last reply applied said it (absent: off). */
  mutedMentions: boolean;
}

export function emptyCopy(): ClientCopy {
  return { cursor: null, states: new Map(), heads: {}, extras: {}, mutedMentions: false };
}

export function cloneCopy(copy: ClientCopy): ClientCopy {
  return {
    cursor: copy.cursor ? { ...copy.cursor } : null,
    states: new Map([...copy.states].map(([k, s]) => [k, { ...s }])),
    heads: { ...copy.heads },
    extras: { ...copy.extras },
    mutedMentions: copy.mutedMentions,
  };
}

export interface SyncStats {
  pages: number;
  snapshots: number;
}

const MAX_PAGES = 10_000;

/** Pulls until `more` is false, updating `copy` in place; checks the protocol's invariants on the way. */
export async function syncCopy(server: TestServer, uid: string, copy: ClientCopy, limit: number): Promise<SyncStats> {
  const stats: SyncStats = { pages: 0, snapshots: 0 };
  for (;;) {
    if (++stats.pages > MAX_PAGES) throw new Error(`sync for ${uid} did not finish in ${MAX_PAGES} pages`);
    const since = copy.cursor ? `since=${encodeURIComponent(`${copy.cursor.epoch}:${copy.cursor.version}`)}&` : '';
    const res = await server.asUser<PullReply>(uid, 'GET', `/v1/sync?${since}limit=${limit}`);
    if (res.status !== 200) throw new Error(`GET /v1/sync for ${uid} → ${res.status} ${res.text}`);
    const reply = res.body;
    const previous = copy.cursor;
    if (reply.snapshot) {
      stats.snapshots++;
      if (reply.snapshot.v > reply.version) throw new Error(`snapshot v${reply.snapshot.v} beyond reply version ${reply.version}`);
      copy.states = new Map(reply.snapshot.convs.map((s) => [s.conv, { ...s }]));
    } else {
      if (!previous) throw new Error('first pull without a snapshot');
      if (reply.epoch !== previous.epoch) throw new Error(`epoch changed ${previous.epoch} → ${reply.epoch} without a snapshot`);
    }
    let last = reply.snapshot ? reply.snapshot.v : (previous?.version ?? 0);
    for (const entry of reply.entries) {
      if (entry.v <= last) throw new Error(`entry v${entry.v} not after v${last}`);
      last = entry.v;
      if (entry.state === null) copy.states.delete(entry.conv);
      else {
        if (entry.state.conv !== entry.conv) throw new Error(`entry conv ${entry.conv} carries state of ${entry.state.conv}`);
        copy.states.set(entry.conv, { ...entry.state });
      }
    }
    if (reply.entries.length > limit) throw new Error(`page of ${reply.entries.length} entries exceeds limit ${limit}`);
    if (reply.version !== last) throw new Error(`reply version ${reply.version} but last applied v${last}`);
    // The cursor is monotonic within one stream history.
    if (previous && previous.epoch === reply.epoch && reply.version < previous.version) {
      throw new Error(`cursor went back from ${previous.version} to ${reply.version}`);
    }
    copy.cursor = { epoch: reply.epoch, version: reply.version };
    copy.heads = reply.heads;
    copy.extras = {
      ...(reply.headAt ? { headAt: reply.headAt } : {}),
      ...(reply.mentionAll ? { mentionAll: reply.mentionAll } : {}),
      ...(reply.nocount ? { nocount: reply.nocount } : {}),
    };
    copy.mutedMentions = reply.mutedMentions === true;
    if (!reply.more) return stats;
  }
}

/** What the client shows: visible conversations, sorted by id. */
export function copyViews(copy: ClientCopy): ModelView[] {
  return viewsOf(copy.states.values(), copy.heads, copy.extras);
}
