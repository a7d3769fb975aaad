import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The badge hook's metrics (docs/badge-hook.md, "Metrics"), on the server's registry. */
export class HookMetrics {
  readonly inFlight: Gauge;
  readonly delivered: Counter<'sink'>;
  readonly unchanged: Counter;
  readonly retries: Counter;
  readonly deadLetters: Counter;
  readonly lag: Histogram;
  readonly expanded: Counter;

  constructor(registry: Registry) {
    const registers = [registry];
    this.inFlight = new Gauge({
      name: 'redpoint_badge_hook_queued',
      help: 'Users this process claimed and is delivering (the rest wait as marks in the store, one per user)',
      registers,
    });
    this.delivered = new Counter({ name: 'redpoint_badge_hook_delivered_total', help: 'Badge events accepted, per sink', labelNames: ['sink'], registers });
    this.unchanged = new Counter({
      name: 'redpoint_badge_hook_unchanged_total',
      help: 'Marked users whose badge equalled the last one delivered (no event)',
      registers,
    });
    this.retries = new Counter({ name: 'redpoint_badge_hook_retries_total', help: 'Failed delivery attempts followed by a retry', registers });
    this.deadLetters = new Counter({
      name: 'redpoint_badge_hook_dead_letters_total',
      help: 'Events whose last attempt failed (the user is tried again after BADGE_HOOK_PARK_MS)',
      registers,
    });
    this.lag = new Histogram({
      name: 'redpoint_badge_hook_lag_seconds',
      help: 'From when a mark was due to its event being accepted',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers,
    });
    this.expanded = new Counter({
      name: 'redpoint_badge_hook_group_expansions_total',
      help: 'Read-diffused conversations whose members were marked',
      registers,
    });
  }
}
