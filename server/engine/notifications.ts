import type { ConvState } from '../../protocol/types.js';

/** A change to one user's stream: what a push to that user's devices carries. */
export interface UserChange {
  uid: string;
  conv: string;
  epoch: string;
  version: number;
  /** null: the user left the conversation. */
  state: ConvState | null;
  /** When the message that caused it reached the server (wall-clock ms), for the push-lag metric. */
  at?: number;
}

/** A read-diffused conversation got a new head: one push to every member online. */
export interface HeadChange {
  conv: string;
  maxSeq: number;
  at?: number;
  /**
   * Issue 43: what the messages behind this change add to the conversation's PullReply maps
   * (rules.ts headPushExtras): their newest `at`, their @all seqs that count, the seqs that stop
   * counting. A client merges them as it merges a pull's, so a recall or an @all reaches its
   * count with the push, not only with its next pull.
   */
  headAt?: number;
  mentionAll?: number[];
  nocount?: number[];
}

/**
 * Others' read positions in a conversation changed (read receipts, server/sync/receipts.ts): for
 * one recipient, never part of their stream. `reads`: the other sharing members' positions.
 */
export interface ReadsChange {
  uid: string;
  conv: string;
  /** The conversation's member count (2: a one-to-one chat). */
  members: number;
  reads: Record<string, number>;
}

export interface NotificationHandler {
  /** One user step's changes, in version order. */
  userChanged(changes: readonly UserChange[]): void;
  headChanged(change: HeadChange): void;
  readsChanged?(change: ReadsChange): void;
}

/**
 * The store's change feed. The store publishes every user's changes from inside the step that
 * made them, so whichever process made them, a process hears one user's changes in version
 * order. A process follows only the users and large groups it has sockets for (`follow`), and
 * hears nothing else. Delivery is at most once: a lost notification (a broken connection) is
 * repaired by the clients' pulls.
 */
export interface Notifications {
  /** Resolves once changes made from now on to this user reach `handler`. Counted: follow twice, unfollow twice. */
  followUser(uid: string): Promise<void>;
  unfollowUser(uid: string): void;
  followConversation(conv: string): Promise<void>;
  unfollowConversation(conv: string): void;
  setHandler(handler: NotificationHandler): void;
}

/** Counts interest per channel: `first` runs at the first follow, `last` at the last unfollow. */
export class InterestCounter {
  private readonly counts = new Map<string, number>();

  add(channel: string): boolean {
    const n = this.counts.get(channel) ?? 0;
    this.counts.set(channel, n + 1);
    return n === 0;
  }

  /** True when this was the last interest in the channel. */
  remove(channel: string): boolean {
    const n = this.counts.get(channel);
    if (n === undefined) return false;
    if (n > 1) {
      this.counts.set(channel, n - 1);
      return false;
    }
    this.counts.delete(channel);
    return true;
  }

  has(channel: string): boolean {
    return this.counts.has(channel);
  }

  clear(): void {
    this.counts.clear();
  }
}
