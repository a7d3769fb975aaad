import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { type ConvLine, type ImportBatch, parseImportLine, type UserLine } from '../admin/import.js';
import type { Toolbox } from '../admin/toolbox.js';
import { convertCounts, type LegacyConversion, type LegacyLayout, readLegacyCounters } from './legacy-counters.js';
import { progressBar, rateSince } from './progress.js';

export interface ImportArgs {
  file: string;
  dryRun: boolean;
  /** Per-user lines come (also) from the classic counters layout. */
  legacy: LegacyLayout | undefined;
  /** (user, conversation) pairs per batch. */
  batchPairs: number;
  /** Batches in flight at once. */
  parallel: number;
  json: boolean;
  progress: boolean;
}

interface ParsedFile {
  convs: Map<string, ConvLine>;
  users: Map<string, UserLine>;
  lines: number;
  bad: { line: number; error: string }[];
}

const BAD_SHOWN = 10;

/**
 * `redpoint import`: reads the whole file (conversation lines and per-user lines may come in any
 * order, so it holds them, about 150 bytes per pair), adds the legacy counters' read positions,
 * then imports conversation by conversation in batches, several batches in flight.
 */
export async function importCommand(toolbox: Toolbox, args: ImportArgs, out: (text: string) => void): Promise<number> {
  const started = performance.now();
  const parsed = await parseFile(args.file);
  let legacy: LegacyConversion | undefined;
  if (args.legacy) {
    const read = await readLegacyCounters(args.legacy);
    const heads = new Map([...parsed.convs.values()].map((c) => [c.conv, c.maxSeq]));
    const elsewhere = [...new Set(read.users.flatMap((u) => [...u.counts.keys()]))].filter((conv) => !heads.has(conv));
    for (let i = 0; i < elsewhere.length; i += 1000) {
      for (const [conv, head] of Object.entries(await toolbox.heads(elsewhere.slice(i, i + 1000)))) heads.set(conv, head);
    }
    legacy = convertCounts(read.users, heads, read.malformed);
    for (const line of legacy.lines) mergeUserLine(parsed.users, line);
  }

  const batches = makeBatches(parsed, args.batchPairs);
  const totalPairs = batches.reduce((n, b) => n + b.pairs, 0);
  const bar = args.progress ? progressBar(args.dryRun ? 'import (dry run)' : 'import', 'pairs') : undefined;
  const importStarted = performance.now();
  bar?.start(totalPairs, 0, { rate: 0, detail: '' });
  let pairs = 0;
  let conversations = 0;
  const unknown: { uid: string; conv: string }[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < batches.length) {
      const b = batches[next++];
      if (!b) return;
      const result = await toolbox.importBatch(b.batch, args.dryRun);
      pairs += result.pairs;
      conversations += result.conversations;
      unknown.push(...result.unknown);
      bar?.update(Math.min(totalPairs, pairs), { rate: rateSince(importStarted, pairs), detail: `${conversations} conversations` });
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, args.parallel) }, worker));
  bar?.stop();
  const seconds = (performance.now() - started) / 1000;
  const importSeconds = (performance.now() - importStarted) / 1000;
  const summary = {
    dryRun: args.dryRun,
    lines: parsed.lines,
    conversations,
    pairs,
    users: new Set(batches.flatMap((b) => [...b.uids])).size,
    unknown,
    bad: parsed.bad,
    seconds,
    pairsPerSecond: Math.round(pairs / Math.max(importSeconds, 0.001)),
    ...(legacy
      ? {
          legacy: {
            users: legacy.users,
            converted: legacy.lines.length,
            inconsistent: legacy.inconsistent,
            unknown: legacy.unknown,
            clamped: legacy.clamped,
            malformed: legacy.malformed,
          },
        }
      : {}),
  };
  if (args.json) out(`${JSON.stringify(summary, null, 2)}\n`);
  else out(describe(summary));
  return parsed.bad.length > 0 || unknown.length > 0 ? 1 : 0;
}

async function parseFile(file: string): Promise<ParsedFile> {
  const out: ParsedFile = { convs: new Map(), users: new Map(), lines: 0, bad: [] };
  const lines = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const text of lines) {
    out.lines += 1;
    if (text.trim() === '') continue;
    try {
      const parsed = parseImportLine(text);
      if (parsed.kind === 'user') mergeUserLine(out.users, parsed.line);
      else {
        const c = parsed.line;
        const had = out.convs.get(c.conv);
        // A conversation named twice: the union of its members, the larger head, the later category.
        out.convs.set(c.conv, had ? { ...had, ...c, members: [...new Set([...had.members, ...c.members])], maxSeq: Math.max(had.maxSeq, c.maxSeq) } : c);
      }
    } catch (err) {
      out.bad.push({ line: out.lines, error: err instanceof Error ? err.message : String(err) });
    }
  }
  return out;
}

/** Two lines for one (user, conversation): the one read further wins, flags of the later one. */
function mergeUserLine(users: Map<string, UserLine>, line: UserLine): void {
  const key = `${line.uid}\u0000${line.conv}`;
  const had = users.get(key);
  users.set(key, had ? { ...had, ...line, readSeq: Math.max(had.readSeq, line.readSeq) } : line);
}

interface Batch {
  batch: ImportBatch;
  pairs: number;
  uids: Set<string>;
}

/** Conversations (with their user lines) packed into batches of about `pairs` pairs. */
function makeBatches(parsed: ParsedFile, pairs: number): Batch[] {
  const byConv = new Map<string, UserLine[]>();
  for (const u of parsed.users.values()) {
    const list = byConv.get(u.conv);
    if (list) list.push(u);
    else byConv.set(u.conv, [u]);
  }
  const out: Batch[] = [];
  let current: Batch = { batch: { conversations: [], users: [] }, pairs: 0, uids: new Set() };
  const flush = (): void => {
    if (current.pairs > 0 || current.batch.conversations.length > 0) out.push(current);
    current = { batch: { conversations: [], users: [] }, pairs: 0, uids: new Set() };
  };
  const place = (conv: ConvLine | undefined, users: UserLine[]): void => {
    const uids = new Set([...(conv?.members ?? []), ...users.map((u) => u.uid)]);
    if (current.pairs > 0 && current.pairs + uids.size > pairs) flush();
    if (conv) current.batch.conversations.push(conv);
    current.batch.users.push(...users);
    current.pairs += uids.size;
    for (const uid of uids) current.uids.add(uid);
  };
  for (const conv of parsed.convs.values()) place(conv, byConv.get(conv.conv) ?? []);
  for (const [conv, users] of byConv) if (!parsed.convs.has(conv)) for (let i = 0; i < users.length; i += pairs) place(undefined, users.slice(i, i + pairs));
  flush();
  return out;
}

function describe(s: {
  dryRun: boolean;
  lines: number;
  conversations: number;
  pairs: number;
  users: number;
  unknown: { uid: string; conv: string }[];
  bad: { line: number; error: string }[];
  seconds: number;
  pairsPerSecond: number;
  legacy?: {
    users: number;
    converted: number;
    inconsistent: { uid: string; total: number; sum: number }[];
    unknown: unknown[];
    clamped: unknown[];
    malformed: unknown[];
  };
}): string {
  let text = `${s.dryRun ? 'dry run (nothing written): would import' : 'imported'} ${s.conversations} conversations, ${s.pairs} (user, conversation) pairs, ${s.users} users from ${s.lines} lines in ${s.seconds.toFixed(1)} s (${s.pairsPerSecond} pairs/s)\n`;
  if (s.bad.length > 0) {
    text += `bad lines (skipped): ${s.bad.length}\n`;
    for (const b of s.bad.slice(0, BAD_SHOWN)) text += `  line ${b.line}: ${b.error}\n`;
  }
  if (s.unknown.length > 0)
    text += `user lines of unknown conversations (skipped): ${s.unknown.length}, e.g. ${s.unknown
      .slice(0, 3)
      .map((u) => `${u.uid}@${u.conv}`)
      .join(', ')}\n`;
  if (s.legacy) {
    const l = s.legacy;
    text += `legacy counters: ${l.users} users, ${l.converted} counts converted to read positions\n`;
    text += `  users whose legacy total disagreed with their per-conversation counts: ${l.inconsistent.length}\n`;
    for (const u of l.inconsistent.slice(0, BAD_SHOWN)) text += `    ${u.uid}: total ${u.total}, counts sum to ${u.sum}\n`;
    if (l.unknown.length > 0) text += `  counts of conversations not in the file or the store (skipped): ${l.unknown.length}\n`;
    if (l.clamped.length > 0) text += `  counts above their conversation's head (all unread): ${l.clamped.length}\n`;
    if (l.malformed.length > 0) text += `  counts that are not integers (skipped): ${l.malformed.length}\n`;
  }
  return text;
}
