import type { MessageEvent } from '../../../protocol/types.js';
import type { MessageRecord } from '../engine.js';
import { mentionArg } from './user-ops.js';

/** What a flush's messages make each candidate (sender, mentioned user) of a conversation, if a member: ingest mergeOps's sender and mention ops. */
interface Candidate {
  lastSeq: number;
  readSeq: number;
  mentions: number[];
}

/**
 * The per-conversation arguments of ingest_flush.lua: conv, seq, number of candidates (with a '+'
 * when the last activity `at` and the @all seqs 'a,b' follow, '' = none: most flushes carry
 * neither), then per candidate uid, lastSeq, readSeq, mention seqs; the Lua adds what members get
 * from the head (mergeOps, ported).
 */
export function flushArgs(items: readonly MessageRecord[], messages: readonly MessageEvent[], into: (string | number)[]): void {
  const byConv = new Map<string, Map<string, Candidate>>();
  const of = (conv: string, uid: string): Candidate => {
    let per = byConv.get(conv);
    if (!per) byConv.set(conv, (per = new Map()));
    let c = per.get(uid);
    if (!c) per.set(uid, (c = { lastSeq: 0, readSeq: 0, mentions: [] }));
    return c;
  };
  const lastAt = new Map<string, number>();
  const everyone = new Map<string, number[]>();
  for (const m of messages) {
    if (m.at !== undefined) lastAt.set(m.conv, Math.max(lastAt.get(m.conv) ?? 0, m.at));
    if (m.mentionAll === true) {
      const seqs = everyone.get(m.conv);
      if (seqs) seqs.push(m.seq);
      else everyone.set(m.conv, [m.seq]);
    }
    const own = of(m.conv, m.sender);
    own.lastSeq = Math.max(own.lastSeq, m.seq);
    own.readSeq = Math.max(own.readSeq, m.seq);
    // An @all message's mentions are its @all's (mergeOps): one mention per member, once.
    if (m.mentions === undefined || m.mentions.length === 0 || m.mentionAll === true) continue;
    for (const uid of new Set(m.mentions)) {
      if (uid === m.sender) continue;
      const c = of(m.conv, uid);
      c.lastSeq = Math.max(c.lastSeq, m.seq);
      c.mentions.push(m.seq);
    }
  }
  for (const item of items) {
    const per = byConv.get(item.conv) ?? new Map<string, Candidate>();
    const at = lastAt.get(item.conv);
    const all = everyone.get(item.conv);
    if (at === undefined && all === undefined) into.push(item.conv, item.seq, per.size);
    else into.push(item.conv, item.seq, `${per.size}+`, at ?? '', mentionArg(all ?? []));
    for (const [uid, c] of per) into.push(uid, c.lastSeq, c.readSeq, mentionArg(c.mentions));
  }
}
