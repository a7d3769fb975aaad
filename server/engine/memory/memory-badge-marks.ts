import { type BadgeClaim, type BadgeMarks, type BadgeRelease, type ClaimOptions, DELIVERED_TTL_MS, type DeliveredBadge } from '../badge-marks.js';

/**
 * The memory engine's badge marks (engine/badge-marks.ts): the Redis sets' semantics in maps.
 * Every method runs to its end without awaiting, so each is atomic as the Redis scripts are.
 */
export class MemoryBadgeMarks implements BadgeMarks {
  readonly minPollMs = 0;
  /** uid → when its mark is due (ms). */
  private readonly due = new Map<string, number>();
  /** uid → the deadline of its claim. */
  private readonly claims = new Map<string, number>();
  /** uid → the end of its interval after a delivery. */
  private readonly cool = new Map<string, number>();
  /** conv → when its mark is due; conv → the end of its interval. */
  private readonly convDue = new Map<string, number>();
  private readonly convCool = new Map<string, number>();
  private readonly delivered = new Map<string, DeliveredBadge & { until: number }>();
  /** uid → process → until when that process holds a live socket of the user. */
  private readonly presence = new Map<string, Map<string, number>>();

  /** The user step's mark: an existing one keeps its due time. */
  markUser(uid: string, now: number): void {
    if (!this.due.has(uid)) this.due.set(uid, now);
  }

  markConversation(conv: string, now: number): void {
    if (!this.convDue.has(conv)) this.convDue.set(conv, Math.max(now, this.convCool.get(conv) ?? 0));
  }

  /** A wiped user (erase): its last delivered badge and its presence go (as the Redis wipe deletes its :b and :o keys). */
  forget(uid: string): void {
    this.delivered.delete(uid);
    this.presence.delete(uid);
  }

  async markUsers(uids: readonly string[], now: number): Promise<void> {
    for (const uid of uids) this.markUser(uid, now);
  }

  async setPresence(process: string, uids: readonly string[], until: number | null, now: number): Promise<void> {
    for (const uid of uids) {
      let held = this.presence.get(uid);
      if (until === null) {
        held?.delete(process);
        if (held?.size === 0) this.presence.delete(uid);
        // A mark put off while the socket lived is due now (claimUsers puts it off again if the user is claimed or cooling).
        this.due.set(uid, Math.min(this.due.get(uid) ?? now, now));
        continue;
      }
      if (!held) this.presence.set(uid, (held = new Map()));
      held.set(process, until);
    }
  }

  /** Until when some process holds a socket of `uid`, when after `now`. */
  private liveUntil(uid: string, now: number): number | undefined {
    let latest: number | undefined;
    for (const [process, until] of this.presence.get(uid) ?? []) {
      if (until <= now) this.presence.get(uid)?.delete(process);
      else if (latest === undefined || until > latest) latest = until;
    }
    return latest;
  }

  async claimUsers(now: number, leaseMs: number, max: number, options: ClaimOptions = {}): Promise<BadgeClaim[]> {
    for (const [uid, deadline] of this.claims) {
      if (deadline > now) continue;
      this.claims.delete(uid);
      this.markUser(uid, now);
    }
    for (const [uid, until] of this.cool) if (until <= now) this.cool.delete(uid);
    const out: BadgeClaim[] = [];
    const ready = [...this.due].filter(([, at]) => at <= now).sort((a, b) => a[1] - b[1]);
    for (const [uid, at] of ready) {
      if (out.length >= max) break;
      const busy = this.claims.get(uid);
      if (busy !== undefined) {
        this.due.set(uid, busy);
        continue;
      }
      const until = this.cool.get(uid) ?? (options.socketlessOnly ? this.liveUntil(uid, now) : undefined);
      if (until !== undefined) {
        this.due.set(uid, until);
        continue;
      }
      this.due.delete(uid);
      const lease = now + leaseMs;
      this.claims.set(uid, lease);
      const last = this.delivered.get(uid);
      const delivered = last && last.until > now ? { seq: last.seq, badge: last.badge } : null;
      out.push({ uid, lease, dueAt: at, delivered });
    }
    return out;
  }

  async release(claim: BadgeClaim, outcome: BadgeRelease): Promise<void> {
    if (this.claims.get(claim.uid) !== claim.lease) return;
    this.claims.delete(claim.uid);
    const pending = this.due.get(claim.uid);
    if (outcome.kind === 'retry') {
      // The retry's time holds even when a newer change marked the user meanwhile: the fold then
      // delivers that newer value, after the backoff.
      this.due.set(claim.uid, outcome.at);
      return;
    }
    const { seq, badge } = outcome.delivered;
    this.delivered.set(claim.uid, { seq, badge, until: Date.now() + DELIVERED_TTL_MS });
    this.cool.set(claim.uid, outcome.coolUntil);
    // A change during the delivery (its mark put off to the claim's deadline) is due at the interval's end.
    if (pending !== undefined) this.due.set(claim.uid, outcome.coolUntil);
  }

  async takeConversations(now: number, coolUntil: number, max: number): Promise<string[]> {
    const out: string[] = [];
    for (const [conv, at] of this.convDue) {
      if (out.length >= max) break;
      if (at > now) continue;
      this.convDue.delete(conv);
      this.convCool.set(conv, coolUntil);
      out.push(conv);
    }
    for (const [conv, until] of this.convCool) if (until <= now) this.convCool.delete(conv);
    return out;
  }
}
