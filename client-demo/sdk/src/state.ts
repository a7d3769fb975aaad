import type { ConvStore } from './store.js';
import type { ConnectionState, RedpointState, SyncStatus } from './types.js';

export interface StateInputs {
  store: ConvStore;
  connection: ConnectionState;
  /** The socket is welcomed. */
  open: boolean;
  /** A pull completed on the current connection. */
  confirmed: boolean;
  pulling: boolean;
  /** Versions known to exist have not arrived. */
  gap: boolean;
  /** Reads and settings not yet acknowledged. */
  unacked: number;
}

/** The status machine: NO_DATA before anything is known, then DIRTY > PENDING > SYNCED by precedence. */
function statusOf(i: StateInputs): SyncStatus {
  if (!i.store.hasData) return 'NO_DATA';
  if (!i.confirmed || i.pulling || i.gap) return 'DIRTY';
  if (i.unacked > 0 || i.store.overlays > 0) return 'PENDING';
  return 'SYNCED';
}

export function deriveState(i: StateInputs): RedpointState {
  const view = i.store.hasData ? i.store.view() : null;
  return {
    status: statusOf(i),
    stale: i.store.hasData && !(i.confirmed && i.open),
    connection: i.connection,
    uid: i.store.uid,
    cursor: i.store.cursor,
    conversations: view?.conversations ?? [],
    totals: view?.totals ?? null,
    mutedMentions: i.store.mutedMentions,
  };
}
