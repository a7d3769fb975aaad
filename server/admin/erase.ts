import type { EraseResult, UserTraces } from '../../protocol/admin-replies.js';
import type { EngineAdmin } from '../engine/admin.js';
import type { Engine } from '../engine/engine.js';
import { changeMembership } from '../sync/membership.js';

export type { EraseResult, UserTraces };

/** Rounds of remove-then-wipe before giving up on a user that keeps changing. */
const MAX_ROUNDS = 8;
const SCAN_PAGE = 500;

/**
 * Forgets a user: removes it from every conversation its records name (each a normal membership
 * change: the member count, the diffusion mode and the other members' records follow), then
 * deletes every key of the user — records, meta and totals, stream, snapshot, the index of
 * read-diffused conversations — in one atomic step that happens only if the records are still
 * the ones read just before. If anything landed in between, it looks again.
 *
 * That last step is the moment of the erase. A membership change adding the user that lands
 * after it makes the user exist again, with only that conversation (as a new user: a new epoch);
 * one that landed before is undone by the erase. Either way the outcome is one order of the two,
 * as for any concurrent requests. What the records cannot name — a conversation whose add of
 * this user never reached the user (a failed request never retried) — `scan` finds by walking
 * every conversation (the CLI's `erase user` does; the HTTP endpoint does on `?scan=1`).
 *
 * Safe to retry: a repeat finds whatever is left and finishes.
 */
export async function eraseUser(
  engine: Engine,
  admin: EngineAdmin,
  threshold: number,
  uid: string,
  options: { scan: boolean } = { scan: false },
): Promise<EraseResult> {
  const removed = new Set<string>();
  const foundByScan: string[] = [];
  const leave = async (conv: string): Promise<void> => {
    await changeMembership(engine, threshold, conv, { add: [], remove: [uid] });
    // Read receipts: the user's position in it goes too (after the leave's step: reads_raise.lua).
    await engine.readPositions.drop(uid, [conv]);
    removed.add(conv);
  };
  const wipe = async (): Promise<void> => {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const raw = await admin.readUser(uid);
      const views = await admin.conversationViews(
        uid,
        raw.records.map((r) => r.conv),
      );
      const listing = [...views].filter(([, v]) => v.tag !== null).map(([conv]) => conv);
      if (listing.length > 0) {
        // Removing wrote a leave to the user's records: read them again before wiping.
        for (const conv of listing) await leave(conv);
        continue;
      }
      if (await admin.wipeUser(uid, raw.records)) return;
    }
    throw new Error(`user ${uid} kept changing while being erased; retry`);
  };
  await wipe();
  if (options.scan) {
    let cursor = '';
    do {
      const page = await admin.scanConversations(cursor, SCAN_PAGE);
      for (const conv of await admin.convsListing(uid, page.ids)) {
        foundByScan.push(conv);
        await leave(conv);
      }
      cursor = page.cursor;
    } while (cursor !== '');
    if (foundByScan.length > 0) await wipe();
  }
  return { uid, conversations: [...removed].sort(), foundByScan };
}

/** What is left of a user in the store: its own state, and conversations (of `convs`) that list it. */
export async function userTraces(admin: EngineAdmin, uid: string): Promise<UserTraces> {
  const raw = await admin.readUser(uid);
  const state = raw.meta !== null || raw.records.length > 0 || raw.stream.length > 0 || raw.largeIndex.length > 0 || raw.ttl.snapshot !== -2;
  const listedIn: string[] = [];
  let cursor = '';
  do {
    const page = await admin.scanConversations(cursor, SCAN_PAGE);
    listedIn.push(...(await admin.convsListing(uid, page.ids)));
    cursor = page.cursor;
  } while (cursor !== '');
  return { state, listedIn };
}
