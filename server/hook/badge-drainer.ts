import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { BadgeClaim, BadgeMarks } from '../engine/badge-marks.js';
import { type Badge, type BadgeEvent, badgeEvent, badgeText, parseBadge } from './badge-event.js';
import type { HookMetrics } from './hook-metrics.js';
import type { BadgeSink } from './sinks.js';

export interface DrainerOptions {
  intervalMs: number;
  attempts: number;
  retryMs: number;
  parkMs: number;
  concurrency: number;
  /** One sink attempt's bound (ms): with `attempts` and `retryMs` it sizes the claim's lease. */
  attemptTimeoutMs: number;
  /** BADGE_HOOK_SOCKETLESS_ONLY: users with a live socket in any process are left for later (presence.ts). */
  socketlessOnly: boolean;
}

export interface DrainerDeps {
  marks: BadgeMarks;
  /** The user's badge now, as GET /unread reports it (the store's read path). */
  fold(uid: string): Promise<Badge>;
  /** The members of a read-diffused conversation (to mark them when its head moved). */
  members(conv: string): Promise<string[]>;
  sinks: readonly BadgeSink[];
  metrics: HookMetrics;
  log: Logger;
}

/** Read-diffused conversations expanded per poll, at most. */
const CONVS_PER_POLL = 16;

/**
 * The badge hook's worker, one per process: polls the store's marks, claims users (at most
 * `concurrency` in flight), folds each one's current badge and delivers it when it differs from
 * the last one delivered. Retries re-fold first, so a retry carries the newest badge (drop to
 * latest); an unchanged badge keeps its event (same seq, same idempotency key). Ingest never
 * waits for any of it: it only leaves marks, one per user however many changes.
 */
export class BadgeDrainer {
  private inFlight = 0;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private readonly running = new Set<Promise<void>>();
  private stopped = false;
  /** Aborts the backoffs in flight on stop: their users are handed back (due at once) for another process. */
  private readonly stopping = new AbortController();
  private readonly leaseMs: number;
  private readonly pollMs: number;

  constructor(
    private readonly deps: DrainerDeps,
    private readonly options: DrainerOptions,
  ) {
    // The whole retry schedule fits in the lease (every attempt at its timeout, every backoff at
    // its most), plus a fold per attempt: no other drainer takes the user meanwhile.
    const { attempts, retryMs, attemptTimeoutMs } = options;
    this.leaseMs = attempts * (attemptTimeoutMs + 5_000) + retryMs * 2 ** attempts;
    this.pollMs = Math.max(deps.marks.minPollMs, Math.min(1_000, Math.max(20, Math.floor(options.intervalMs / 4))));
  }

  start(): void {
    this.schedule(0);
  }

  /** Stops polling and waits for the deliveries in flight (each ends within its lease at most). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    clearTimeout(this.timer);
    await this.polling;
    await Promise.all(this.running);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.polling = this.poll().finally(() => {
        this.polling = undefined;
        this.schedule(this.pollMs);
      });
    }, ms);
  }

  private async poll(): Promise<void> {
    try {
      const now = Date.now();
      const { marks } = this.deps;
      const convs = await marks.takeConversations(now, now + this.options.intervalMs, CONVS_PER_POLL);
      // Each conversation's expansion is independent: together, not one round trip after another.
      await Promise.all(
        convs.map(async (conv) => {
          const members = await this.deps.members(conv);
          if (members.length === 0) return;
          await marks.markUsers(members, now);
          this.deps.metrics.expanded.inc();
        }),
      );
      const room = this.options.concurrency - this.inFlight;
      if (room <= 0 || this.stopped) return;
      const claims = await marks.claimUsers(now, this.leaseMs, room, { socketlessOnly: this.options.socketlessOnly });
      for (const claim of claims) this.track(this.handle(claim));
    } catch (err) {
      this.deps.log.warn({ event: 'badge_hook_poll_failed', err }, 'badge hook: polling the marks failed');
    }
  }

  private track(work: Promise<void>): void {
    this.inFlight++;
    this.deps.metrics.inFlight.set(this.inFlight);
    this.running.add(work);
    void work.finally(() => {
      this.running.delete(work);
      this.inFlight--;
      this.deps.metrics.inFlight.set(this.inFlight);
    });
  }

  /** One claimed user: fold, deliver (with retries), release. Never rejects. */
  private async handle(claim: BadgeClaim): Promise<void> {
    const { marks, metrics, log } = this.deps;
    const { intervalMs, attempts, retryMs, parkMs } = this.options;
    const previous = claim.delivered ? parseBadge(claim.delivered.badge) : null;
    let event: BadgeEvent | undefined;
    try {
      for (let attempt = 1; attempt <= attempts; attempt++) {
        if (attempt > 1) {
          metrics.retries.inc();
          // Exponential backoff with jitter: half the step fixed, half random.
          const step = retryMs * 2 ** (attempt - 2);
          const signal = this.stopping.signal;
          await sleep(step / 2 + Math.random() * (step / 2), undefined, { signal }).catch((err: unknown) => {
            if (!signal.aborted) throw err;
          });
          if (signal.aborted) {
            // Shutting down: the user is due again at once, for whichever process drains next.
            await marks.release(claim, { kind: 'retry', at: Date.now() });
            return;
          }
        }
        const badge = await this.deps.fold(claim.uid);
        const text = badgeText(badge);
        if (claim.delivered && text === claim.delivered.badge) {
          // Nothing new for the push service: no event, no interval.
          metrics.unchanged.inc();
          await marks.release(claim, { kind: 'delivered', delivered: claim.delivered, coolUntil: Date.now() });
          return;
        }
        if (!event || badgeText(event.badge) !== text) {
          // A new value gets a new sequence: above the last delivered, and above any this
          // user's earlier (crashed) claims could have used, as clocks only move on.
          const seq = Math.max((claim.delivered?.seq ?? 0) + 1, Date.now(), (event?.seq ?? 0) + 1);
          event = badgeEvent(claim.uid, seq, badge, previous, Date.now());
        }
        if (await this.send(event)) {
          metrics.lag.observe(Math.max(0, Date.now() - claim.dueAt) / 1000);
          await marks.release(claim, { kind: 'delivered', delivered: { seq: event.seq, badge: text }, coolUntil: Date.now() + intervalMs });
          return;
        }
      }
      metrics.deadLetters.inc();
      log.warn({ event: 'badge_hook_dead_letter', uid: claim.uid, attempts }, 'badge hook: event not accepted after its last attempt');
      await marks.release(claim, { kind: 'retry', at: Date.now() + parkMs });
    } catch (err) {
      log.warn({ event: 'badge_hook_store_failed', uid: claim.uid, err }, 'badge hook: store call failed');
      // The store failed (fold or release): hand the user back for a retry after the first
      // backoff; if that fails too, the claim expires and the next claim step marks it again.
      await marks.release(claim, { kind: 'retry', at: Date.now() + retryMs }).catch((again: unknown) => {
        log.debug({ event: 'badge_hook_release_failed', uid: claim.uid, err: again }, 'badge hook: release failed (the claim will expire)');
      });
    }
  }

  /** Every sink accepts, or false (all are tried again: receivers de-duplicate on the key). */
  private async send(event: BadgeEvent): Promise<boolean> {
    const outcomes = await Promise.allSettled(this.deps.sinks.map((sink) => sink.deliver(event)));
    let ok = true;
    outcomes.forEach((outcome, i) => {
      const sink = this.deps.sinks[i] as BadgeSink;
      if (outcome.status === 'fulfilled') this.deps.metrics.delivered.inc({ sink: sink.name });
      else {
        ok = false;
        this.deps.log.debug({ event: 'badge_hook_attempt_failed', sink: sink.name, err: outcome.reason }, 'badge hook: attempt failed');
      }
    });
    return ok;
  }
}
