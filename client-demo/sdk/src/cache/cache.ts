import type { ConvState, Cursor } from '../wire-types.js';

/** What the client keeps across restarts: enough to show the last known counts, and to resume. */
export interface CachedState {
  /** 2: heads as entries (format 1 kept them in an object keyed by conversation id). */
  format: 2;
  /** Whose state this is; a client that signs in as someone else starts over. */
  uid: string | null;
  cursor: Cursor | null;
  convs: ConvState[];
  heads: Array<[string, number]>;
  /**
   * Reads not yet acknowledged: sent again after the restart, with the read generation each was
   * made in (absent in a cache written before generations: the cached state's).
   */
  reads: Array<[string, number, number?]>;
  savedAt: number;
}

/** Storage for one client's state. Implementations: memory, file (Node), IndexedDB (browser). */
export interface CacheAdapter {
  load(): Promise<CachedState | undefined>;
  save(state: CachedState): Promise<void>;
  clear(): Promise<void>;
}

/** Rejects anything that is not a CachedState of this format (an older build's data, a corrupt file). */
export function validCachedState(value: unknown): CachedState | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Partial<CachedState>;
  if (v.format !== 2 || !Array.isArray(v.convs) || !Array.isArray(v.reads) || !Array.isArray(v.heads)) return undefined;
  return v as CachedState;
}
