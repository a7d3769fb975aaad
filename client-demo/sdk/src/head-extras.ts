import type { HeadFrame } from '../../../protocol/frames.js';
import { LIMITS } from '../../../protocol/limits.js';
import type { PullReply } from '../../../protocol/types.js';
import type { HeadExtras } from '../../../protocol/view.js';
import type { CachedExtras } from './cache/cache.js';

type Extras = Pick<PullReply, 'headAt' | 'mentionAll' | 'nocount'>;

interface Kept {
  at: number;
  all: Set<number>;
  nocount: Set<number>;
}

/**
 * What read-diffused conversations keep beside their heads (issue 43: last activity, @all seqs,
 * non-counting seqs), merged from pulls and `head` pushes alike. Each only grows while the
 * conversation stays read-diffused (a max-register and two sets), so merging in any order gives
 * the same: a pull read before a push that arrives after it cannot take the push's recall back
 * (PROTOCOL.md "Read-diffused groups"). A conversation that leaves read diffusion, or the
 * client, is dropped; the server drops its @all seqs then too. Kept in a Map: ids such as
 * `__proto__` are valid; `record` is what protocol/view.ts reads (own keys only).
 */
export class KeptExtras {
  private readonly map = new Map<string, Kept>();
  private cached: HeadExtras | null = null;

  /** From a cache (`entries()` of an earlier run). */
  constructor(entries: Iterable<CachedExtras> = []) {
    for (const e of entries) this.add(e.conv, e.at ?? 0, e.mentionAll ?? [], e.nocount ?? []);
  }

  /** A pull reply's maps. */
  mergeReply(reply: Extras): void {
    for (const [conv, at] of Object.entries(reply.headAt ?? {})) this.add(conv, at, [], []);
    for (const [conv, seqs] of Object.entries(reply.mentionAll ?? {})) this.add(conv, 0, seqs, []);
    for (const [conv, seqs] of Object.entries(reply.nocount ?? {})) this.add(conv, 0, [], seqs);
  }

  /** A `head` push's additions. */
  mergeHead(frame: Pick<HeadFrame, 'conv' | 'headAt' | 'mentionAll' | 'nocount'>): void {
    if (frame.headAt === undefined && frame.mentionAll === undefined && frame.nocount === undefined) return;
    this.add(frame.conv, frame.headAt ?? 0, frame.mentionAll ?? [], frame.nocount ?? []);
  }

  /** Drops one conversation's (it left read diffusion, or the client). */
  delete(conv: string): void {
    if (this.map.delete(conv)) this.cached = null;
  }

  /** Drops the conversations `keep` says are no longer read-diffused (or no longer the client's). */
  retain(keep: (conv: string) => boolean): void {
    for (const conv of [...this.map.keys()]) {
      if (!keep(conv)) {
        this.map.delete(conv);
        this.cached = null;
      }
    }
  }

  /** For the cache: one entry a conversation, each field only when it has something. */
  entries(): CachedExtras[] {
    return [...this.map].map(([conv, kept]) => ({
      conv,
      ...(kept.at > 0 ? { at: kept.at } : {}),
      ...(kept.all.size > 0 ? { mentionAll: newest(kept.all, LIMITS.mentionSeqsPerConversation) } : {}),
      ...(kept.nocount.size > 0 ? { nocount: newest(kept.nocount, LIMITS.nocountSeqsPerConversation) } : {}),
    }));
  }

  /** As protocol/view.ts reads them (PullReply's three maps). */
  get record(): HeadExtras {
    if (this.cached) return this.cached;
    const headAt: [string, number][] = [];
    const mentionAll: [string, number[]][] = [];
    const nocount: [string, number[]][] = [];
    for (const [conv, kept] of this.map) {
      if (kept.at > 0) headAt.push([conv, kept.at]);
      if (kept.all.size > 0) mentionAll.push([conv, newest(kept.all, LIMITS.mentionSeqsPerConversation)]);
      if (kept.nocount.size > 0) nocount.push([conv, newest(kept.nocount, LIMITS.nocountSeqsPerConversation)]);
    }
    this.cached = {
      ...(headAt.length > 0 ? { headAt: Object.fromEntries(headAt) } : {}),
      ...(mentionAll.length > 0 ? { mentionAll: Object.fromEntries(mentionAll) } : {}),
      ...(nocount.length > 0 ? { nocount: Object.fromEntries(nocount) } : {}),
    };
    return this.cached;
  }

  private add(conv: string, at: number, all: readonly number[], nocount: readonly number[]): void {
    let kept = this.map.get(conv);
    if (!kept) {
      kept = { at: 0, all: new Set(), nocount: new Set() };
      this.map.set(conv, kept);
    }
    kept.at = Math.max(kept.at, at);
    for (const seq of all) kept.all.add(seq);
    for (const seq of nocount) kept.nocount.add(seq);
    trim(kept.all, LIMITS.mentionSeqsPerConversation);
    trim(kept.nocount, LIMITS.nocountSeqsPerConversation);
    this.cached = null;
  }
}

/** Ascending, the newest `cap`. */
function newest(seqs: ReadonlySet<number>, cap: number): number[] {
  const sorted = [...seqs].sort((a, b) => a - b);
  return sorted.length > cap ? sorted.slice(sorted.length - cap) : sorted;
}

/** The server keeps the newest `cap` of each set: so does the client, or a forgotten one would count here only. */
function trim(seqs: Set<number>, cap: number): void {
  if (seqs.size <= cap) return;
  const sorted = [...seqs].sort((a, b) => a - b);
  for (const seq of sorted.slice(0, sorted.length - cap)) seqs.delete(seq);
}
