/**
 * The badge hook's port into the store (server/hook/ drains it; docs/badge-hook.md). With the hook
 * on (EngineOptions.badgeMarks), every user step that changed something visible marks the user —
 * in the same atomic step as the change, so a crash cannot lose a mark — and every raised head of
 * a read-diffused conversation marks the conversation. A mark says only "this badge may have
 * changed": the drainer folds the user's current totals and delivers the latest value, so marks
 * coalesce by construction (one per user, however many changes).
 *
 * Several processes drain one store. A user is claimed by one drainer at a time: the claim holds
 * until it is released or its lease passes (a crashed drainer's user is then marked again), and a
 * mark set while its user is claimed waits for the release. Each method is one atomic step per
 * store shard (one Redis; one slot of a cluster).
 */
export interface BadgeMarks {
  /** The drainer polls no more often than this (ms): a Redis Cluster's claims probe its 16,384 slots. */
  readonly minPollMs: number;
  /**
   * Up to `max` users whose mark is due at `now` (ms), each claimed until `now + leaseMs`, with
   * what was last delivered for them. A due mark of a user cooling down (released `delivered`
   * with a later `coolUntil`) is put off to that time instead. Expired claims are marked again.
   */
  claimUsers(now: number, leaseMs: number, max: number, options?: ClaimOptions): Promise<BadgeClaim[]>;
  /** Ends a claim (only while it is still this claim's: a lease taken over is left alone). */
  release(claim: BadgeClaim, outcome: BadgeRelease): Promise<void>;
  /**
   * Up to `max` read-diffused conversations whose head moved and whose mark is due at `now`,
   * removed from the marks and put off until `coolUntil` for a later head move (a large group is
   * expanded at most once per interval). The caller marks their members (`markUsers`); a crash in
   * between loses the expansion of that move (see docs/badge-hook.md).
   */
  takeConversations(now: number, coolUntil: number, max: number): Promise<string[]>;
  /** Marks users whose badge may have changed outside a user step (members of a read-diffused conversation). */
  markUsers(uids: readonly string[], now: number): Promise<void>;
  /**
   * Server process `process` holds a live socket of each of `uids` until `until` (ms; refreshed
   * before then), or (`until` null) no longer holds any: its entry is removed and the user
   * marked, so a change skipped while the socket was live is delivered now (socket-less rule).
   */
  setPresence(process: string, uids: readonly string[], until: number | null, now: number): Promise<void>;
}

export interface ClaimOptions {
  /**
   * BADGE_HOOK_SOCKETLESS_ONLY: a user some process holds a live socket of (setPresence) is not
   * claimed; its mark is put off to when the newest presence entry lapses.
   */
  socketlessOnly?: boolean;
}

export interface BadgeClaim {
  uid: string;
  /** The claim's deadline (ms): names the claim, so the release of one that expired and was taken over does nothing. */
  lease: number;
  /** When the mark was due (ms): now minus this is the hook's lag. */
  dueAt: number;
  /** The last event delivered for the user, or null (none, or forgotten after DELIVERED_TTL_MS). */
  delivered: DeliveredBadge | null;
}

/** The last event delivered for a user: its sequence and its badge's canonical text (server/hook/badge-event.ts). */
export interface DeliveredBadge {
  seq: number;
  badge: string;
}

export type BadgeRelease =
  /** Delivered (or nothing to deliver: the badge equals `delivered`): a new mark is not due before `coolUntil`. */
  | { kind: 'delivered'; delivered: DeliveredBadge; coolUntil: number }
  /** Not delivered: the user is marked again, due at `at`. */
  | { kind: 'retry'; at: number };

/** How long the last delivered event of a user is kept (its `previous` of the next event): 30 days. */
export const DELIVERED_TTL_MS = 30 * 24 * 3600 * 1000;
