import type { Logger } from 'pino';
import type { Cursor } from '../../protocol/types.js';
import { StoreError } from '../engine/store-errors.js';
import type { SyncService } from '../sync/sync-service.js';

/** A socket the version check reaches (ws-session.ts WsSession). */
export interface VersionTarget {
  readonly convs: ReadonlySet<string>;
  readonly isClosed: boolean;
  deliverVersion(position: Cursor, heads: ReadonlyMap<string, number>): void;
}

/**
 * The safety net (DESIGN.md §4), for the periodic sweep and after a congested socket drains: each
 * socket of `uid` hears the server's cursor. A large group's head is not in the user's stream, so
 * the version cannot reveal a lost head push: the check repeats the current head of each large
 * group the sockets follow.
 */
export async function checkVersion(sync: SyncService, log: Logger, uid: string, sockets: readonly VersionTarget[], context: object = {}): Promise<void> {
  if (sockets.length === 0) return;
  try {
    const convs = [...new Set(sockets.flatMap((s) => [...s.convs]))];
    const [position, heads] = await Promise.all([sync.position(uid), convs.length > 0 ? sync.engine.heads(convs) : new Map<string, number>()]);
    for (const s of sockets) if (!s.isClosed) s.deliverVersion(position, heads);
  } catch (err) {
    // An outage is reported once by StoreHealth, not once per online user.
    log[err instanceof StoreError ? 'debug' : 'warn']({ err, uid, ...context }, 'version check failed');
  }
}
