import { LIMITS } from '../../protocol/limits.js';
import type { ConvState, PullReply } from '../../protocol/types.js';

export interface SplitReply {
  /** The `convs` of each `sync-part` frame, in order (empty: the reply goes out whole). */
  parts: ConvState[][];
  /** The reply the completing `sync` frame carries: its snapshot holds the last part's convs. */
  last: PullReply;
}

/**
 * A reply whose snapshot has more than `perPart` conversations, cut into `sync-part` frames of
 * `perPart` states and a completing `sync` holding the rest (PROTOCOL.md "Snapshots in parts"),
 * so that no frame is megabytes and encoding a large snapshot does not hold the process.
 */
export function splitSnapshot(reply: PullReply, perPart: number = LIMITS.snapshotPartConvs): SplitReply {
  const snapshot = reply.snapshot;
  if (!snapshot || snapshot.convs.length <= perPart) return { parts: [], last: reply };
  const convs = snapshot.convs;
  // The completing sync keeps the remainder (1..perPart states), so it is never an empty snapshot.
  const lastStart = Math.floor((convs.length - 1) / perPart) * perPart;
  const parts: ConvState[][] = [];
  for (let i = 0; i < lastStart; i += perPart) parts.push(convs.slice(i, i + perPart));
  return { parts, last: { ...reply, snapshot: { v: snapshot.v, convs: convs.slice(lastStart) } } };
}
