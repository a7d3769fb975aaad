import { LIMITS } from '../../../protocol/limits.js';
import type { NotificationLevel } from '../../../protocol/types.js';
import type { UserOp } from '../engine.js';
import { storedLevel } from '../rules.js';

/** Settings are tri-state: set, cleared, or left as they are. */
function flag(v: boolean | undefined): string {
  return v === undefined ? '-' : v ? '1' : '0';
}

/**
 * The level argument (rules.ts: `level` wins over `muted`): the stored bits (rules.ts
 * storedLevel) as '0' the row's default level, '1' none, '2' the other one; '-' unchanged.
 */
function levelArg(op: { conv: string; muted?: boolean; level?: NotificationLevel }): string {
  if (op.level === undefined) return flag(op.muted);
  const bits = storedLevel(op.conv, op.level);
  return bits.muted ? '1' : bits.mentionsOnly ? '2' : '0';
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

/** The newest `LIMITS.nocountSeqsPerConversation` distinct seqs, as one argument (mentionArg's twin). */
function nocountArg(seqs: readonly number[]): string {
  const cap = LIMITS.nocountSeqsPerConversation;
  const distinct = [...new Set(seqs)].sort((a, b) => a - b);
  return (distinct.length > cap ? distinct.slice(distinct.length - cap) : distinct).join(',');
}

/** `<member><large><rebase>`: user_apply.lua reads each by its position. */
function membershipFlags(op: { large: boolean; rebase?: true }): string {
  return `1${op.large ? '1' : '0'}${op.rebase ? '1' : '0'}`;
}

/** How many arguments an op takes in user_apply.lua (its type, conversation and fields). */
export function opArgs(op: UserOp): number {
  if (op.type === 'message') return op.nocountSeqs !== undefined && op.nocountSeqs.length > 0 ? 8 : op.at === undefined ? 6 : 7;
  if (op.type === 'membership') return op.member && op.nocountSeqs !== undefined && op.nocountSeqs.length > 0 ? 10 : 9;
  return op.type === 'read' ? 4 : op.type === 'unread-from' ? 6 : 5;
}

/** Appends one user's ops as user_apply.lua reads them: type, conversation, then the type's fields. */
export function appendUserOps(args: (string | number)[], ops: readonly UserOp[]): void {
  for (const op of ops) {
    switch (op.type) {
      case 'message':
        // 'M': with the last activity, one argument more; most messages carry none ('m').
        // 'n': with non-counting seqs (issue 43), rare; its `at` may be empty.
        if (op.nocountSeqs !== undefined && op.nocountSeqs.length > 0) {
          args.push('n', op.conv, op.lastSeq, op.readSeq, mentionArg(op.mentionSeqs), op.gen ?? '', op.at ?? '', nocountArg(op.nocountSeqs));
        } else if (op.at === undefined) args.push('m', op.conv, op.lastSeq, op.readSeq, mentionArg(op.mentionSeqs), op.gen ?? '');
        else args.push('M', op.conv, op.lastSeq, op.readSeq, mentionArg(op.mentionSeqs), op.gen ?? '', op.at);
        break;
      case 'read':
        args.push('r', op.conv, op.seq, op.gen ?? '');
        break;
      case 'membership':
        // 'G': a rewrite to write diffusion with the conversation's non-counting seqs (issue 43), rare.
        if (op.member && op.nocountSeqs !== undefined && op.nocountSeqs.length > 0)
          args.push('G', op.conv, op.gen, membershipFlags(op), op.joinGen, op.joinHead, op.head, op.category, op.at ?? '', nocountArg(op.nocountSeqs));
        else if (op.member) args.push('g', op.conv, op.gen, membershipFlags(op), op.joinGen, op.joinHead, op.head, op.category, op.at ?? '');
        else args.push('g', op.conv, op.gen, '00', 0, 0, 0, '', '');
        break;
      case 'settings':
        args.push('s', op.conv, levelArg(op), flag(op.markedUnread), op.deleteAt ?? '-');
        break;
      case 'unread-from':
        args.push('U', op.conv, op.seq, op.gen ?? '', op.floor ?? '', op.joinGen ?? '');
        break;
    }
  }
}
