/**
 * The spike's key layout (issue 42): every per-user key carries the user's hash tag, so one
 * user's registers and stream live in one slot (one call per user on a Cluster, one per message
 * on one Redis). Registers are sorted sets scored by seq (`ZADD … GT` is a max-register per
 * member); the stream is a list whose length is the user's version.
 */
export interface UserKeys {
  /** lastSeq per conversation (member conv, score seq). */
  last: string;
  /** readSeq per conversation. */
  read: string;
  /** mute: score = write clock × 2 + muted, so `ZADD GT` is last-writer-wins by the clock. */
  mute: string;
  /** Pending mentions (rare): conv → `seq,seq,…`, in no order; the fold keeps those above readSeq. */
  mentions: string;
  /** Membership, written by the conversation-level step (not the hot path): conv → `gen|joinGen|large|category`. */
  member: string;
  /** The stream: one conversation id per change; the version is its length. */
  stream: string;
  /** The newest snapshot: `<version>\n` and the folded registers (fold.ts's snapshotText), written by compaction. */
  snapshot: string;
  /** The user's channel (PUBLISH: the version and the conversation). */
  channel: string;
}

export const SPIKE_PREFIX = 'sp';

/** The conversations' heads: one max-register per conversation. */
export const HEADS_KEY = `${SPIKE_PREFIX}:heads`;

export function userKeys(uid: string): UserKeys {
  const tag = `${SPIKE_PREFIX}:{${uid}}`;
  return {
    last: `${tag}:l`,
    read: `${tag}:r`,
    mute: `${tag}:u`,
    mentions: `${tag}:m`,
    member: `${tag}:c`,
    stream: `${tag}:x`,
    snapshot: `${tag}:p`,
    channel: `${tag}:bus`,
  };
}

/** Keys a fold reads, in the order the read functions take them. */
export function foldKeys(k: UserKeys): string[] {
  return [k.member, k.last, k.read, k.mute, k.mentions];
}
