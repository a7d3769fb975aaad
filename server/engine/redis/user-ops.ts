import { LIMITS } from '../../../protocol/limits.js';
import type { UserOp } from '../engine.js';

const SLOTS_PER_OP = 8;

/** Settings are tri-state: set, cleared, or left as they are. */
function flag(v: boolean | undefined): string {
  return v === undefined ? '-' : v ? '1' : '0';
}

/**
 * The newest `LIMITS.mentionSeqsPerConversation` distinct seqs, as one argument: the store keeps
 * no more than that anyway, and one string keeps a burst of mentions from becoming an unbounded
 * argument list (user_apply.lua reads it with gmatch).
 */
export function mentionArg(seqs: readonly number[]): string {
  if (seqs.length === 0) return '';
  const cap = LIMITS.mentionSeqsPerConversation;
  const distinct = [...new Set(seqs)].sort((a, b) => a - b);
  return (distinct.length > cap ? distinct.slice(distinct.length - cap) : distinct).join(',');
}

/** The ops of one user as user_apply.lua's ARGV groups (8 slots each, see its header). */
export function userApplyArgs(ops: readonly UserOp[]): (string | number)[] {
  const args: (string | number)[] = new Array(ops.length * SLOTS_PER_OP);
  let i = 0;
  const put = (...values: (string | number)[]): void => {
    for (let k = 0; k < SLOTS_PER_OP; k++) args[i++] = values[k] ?? '';
  };
  for (const op of ops) {
    switch (op.type) {
      case 'message':
        put('m', op.conv, op.lastSeq, op.readSeq, mentionArg(op.mentionSeqs));
        break;
      case 'read':
        put('r', op.conv, op.seq);
        break;
      case 'membership':
        if (op.member) put('g', op.conv, op.gen, op.large ? '11' : '10', op.joinGen, op.joinHead, op.head, op.category);
        else put('g', op.conv, op.gen, '00', 0, 0, 0, '');
        break;
      case 'settings':
        put('s', op.conv, flag(op.muted), flag(op.markedUnread), op.deleteAt ?? '-');
        break;
    }
  }
  return args;
}
