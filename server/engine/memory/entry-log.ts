import { flatCopy } from './text-table.js';

/**
 * A user's stream entries (texts of ../state-text.ts, which never hold a newline) in few flat
 * strings instead of one string per entry: chunks of up to ENTRY_CHUNK entries joined by
 * newlines, and one chunk (nearly every user's whole stream) is the string itself, no array. An
 * append rebuilds only the last chunk, so its cost stays bounded however long the stream is; a
 * trim rebuilds the first one as a flat copy (V8 keeps a slice's whole parent alive).
 */
export interface EntryLog {
  /** '' when empty. */
  entryChunks: string | string[];
  /** Entries kept. */
  entryCount: number;
  /** Entries in the last chunk. */
  entryTail: number;
}

/** Most users keep ~10–13 entries (SNAPSHOT_EVERY 10): one chunk; the chunk an append rebuilds stays short. */
export const ENTRY_CHUNK = 16;

function chunksOf(log: EntryLog): string[] {
  const c = log.entryChunks;
  return typeof c !== 'string' ? c : c === '' ? [] : [c];
}

function setChunks(log: EntryLog, chunks: string[]): void {
  log.entryChunks = chunks.length === 0 ? '' : chunks.length === 1 ? (chunks[0] as string) : chunks;
}

export function appendEntry(log: EntryLog, text: string): void {
  const c = log.entryChunks;
  if (log.entryCount === 0) {
    log.entryChunks = text;
    log.entryTail = 1;
  } else if (log.entryTail >= ENTRY_CHUNK) {
    if (typeof c === 'string') log.entryChunks = [c, text];
    else c.push(text);
    log.entryTail = 1;
  } else {
    if (typeof c === 'string') log.entryChunks = [c, text].join('\n');
    else c[c.length - 1] = [c[c.length - 1], text].join('\n');
    log.entryTail += 1;
  }
  log.entryCount += 1;
}

/** Entries in a chunk: one more than its newlines. */
function countIn(chunk: string): number {
  let n = 1;
  for (let i = chunk.indexOf('\n'); i >= 0; i = chunk.indexOf('\n', i + 1)) n++;
  return n;
}

/** Drops the oldest `n` entries. */
export function trimEntries(log: EntryLog, n: number): void {
  if (n <= 0) return;
  if (n >= log.entryCount) {
    clearEntries(log);
    return;
  }
  const chunks = chunksOf(log);
  let drop = n;
  // n < entryCount: the last chunk always keeps an entry, so the loop stops before it.
  while (chunks.length > 1 && countIn(chunks[0] as string) <= drop) drop -= countIn(chunks.shift() as string);
  if (drop > 0) {
    const first = chunks[0] as string;
    let at = -1;
    for (let k = 0; k < drop; k++) at = first.indexOf('\n', at + 1);
    chunks[0] = flatCopy(first.slice(at + 1));
    if (chunks.length === 1) log.entryTail -= drop;
  }
  log.entryCount -= n;
  setChunks(log, chunks);
}

export function clearEntries(log: EntryLog): void {
  log.entryChunks = '';
  log.entryCount = 0;
  log.entryTail = 0;
}

/** Up to `limit` entry texts from the kept entry at index `start` (0: the oldest kept). */
export function entryTexts(log: EntryLog, start: number, limit: number): string[] {
  const from = Math.max(0, start);
  const to = Math.min(log.entryCount, from + Math.max(0, limit));
  const out: string[] = [];
  let first = 0;
  for (const chunk of chunksOf(log)) {
    if (first >= to) break;
    const n = countIn(chunk);
    if (first + n > from) {
      const lines = chunk.split('\n');
      for (let i = Math.max(from, first); i < Math.min(to, first + n); i++) out.push(lines[i - first] as string);
    }
    first += n;
  }
  return out;
}

/** Drops the newest `n` entries (the test suites' way to lose a stream's tail behind the engine's back). */
export function dropNewestEntries(log: EntryLog, n: number): void {
  const kept = entryTexts(log, 0, Math.max(0, log.entryCount - n));
  clearEntries(log);
  for (const text of kept) appendEntry(log, text);
}
