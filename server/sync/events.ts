import type { ConvState } from '../../protocol/types.js';

/** A change to one user's stream: what a push to that user's devices carries. */
export interface UserChange {
  uid: string;
  conv: string;
  epoch: string;
  version: number;
  /** null: the user left the conversation. */
  state: ConvState | null;
  /** When the message that caused it reached the server (ms, performance time origin based), for latency metrics. */
  at?: number;
}

/** A read-diffused conversation got a new head: one push to every member online. */
export interface HeadChange {
  conv: string;
  maxSeq: number;
  at?: number;
}

export interface SyncListener {
  userChanged?(change: UserChange): void;
  headChanged?(change: HeadChange): void;
}

/** Fan-in point between the sync layer and whoever pushes (the gateway, metrics, tests). */
export class SyncEvents {
  private readonly listeners = new Set<SyncListener>();

  subscribe(listener: SyncListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emitUser(change: UserChange): void {
    for (const l of this.listeners) l.userChanged?.(change);
  }

  emitHead(change: HeadChange): void {
    for (const l of this.listeners) l.headChanged?.(change);
  }
}
