import type { ConvState, Cursor } from '../wire-types.js';

/**
 * What a read-diffused conversation keeps beside its head (PullReply's `headAt`, `mentionAll`,
 * `nocount`), as the cache holds it: one entry a conversation, each field only when it has something.
 */
export interface CachedExtras {
  conv: string;
  /** Last activity (ms). */
  at?: number;
  /** Its @all seqs, ascending. */
  mentionAll?: number[];
  /** Its non-counting seqs, ascending. */
  nocount?: number[];
}

/** What the client keeps across restarts: enough to show the last known counts, and to resume. */
export interface CachedState {
  /**
   * 3: with `extras` and `mutedMentions`. 2 (read as 3 with none and off: the first pull brings
   * them) had neither; 1 (discarded) kept heads in an object keyed by conversation id.
   */
  format: 3;
  /** Whose state this is; a client that signs in as someone else starts over. */
  uid: string | null;
  cursor: Cursor | null;
  convs: ConvState[];
  heads: Array<[string, number]>;
  /** The read-diffused conversations' last activity, @all and non-counting seqs: what their rows and the totals count with. */
  extras: CachedExtras[];
  /** The user's setting (PROTOCOL.md "Notification levels") the totals are summed with. */
  mutedMentions: boolean;
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

/**
 * The CachedState in `value`, format 2 brought up to this one; undefined for anything else (a
 * format 1 build's data, a corrupt file), so a client starts from nothing rather than half of it.
 */
export function validCachedState(value: unknown): CachedState | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Partial<Omit<CachedState, 'format'>> & { format?: unknown };
  if (!Array.isArray(v.convs) || !Array.isArray(v.reads) || !Array.isArray(v.heads)) return undefined;
  // Format 2 knew neither: a read-diffused group's extras and the setting come with the first pull.
  if (v.format === 2) return { ...(v as Omit<CachedState, 'format' | 'extras' | 'mutedMentions'>), format: 3, extras: [], mutedMentions: false };
  if (v.format !== 3 || typeof v.mutedMentions !== 'boolean' || !Array.isArray(v.extras) || !v.extras.every(validExtras)) return undefined;
  return v as CachedState;
}

function validExtras(value: unknown): value is CachedExtras {
  if (typeof value !== 'object' || value === null) return false;
  const e = value as Record<string, unknown>;
  return typeof e.conv === 'string' && (e.at === undefined || typeof e.at === 'number') && seqs(e.mentionAll) && seqs(e.nocount);
}

const seqs = (value: unknown): boolean => value === undefined || (Array.isArray(value) && value.every((seq) => typeof seq === 'number'));
