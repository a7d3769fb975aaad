import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { EngineAdmin } from '../engine/admin.js';
import type { Engine } from '../engine/engine.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Finding } from './checks.js';
import { Reconciler, type ReconcilePage } from './reconcile.js';

export interface ReconcileJobOptions {
  everySeconds: number;
  /** Users and conversations checked per second. */
  rate: number;
  threshold: number;
  graceMs?: number;
  /**
   * With the durable tier: Redis against PostgreSQL (server/durable/db-reconcile.ts), walked
   * with repair after the store's own walk, paced and counted the same way.
   */
  againstDb?: (graceMs: number) => ReconcileWalker;
}

/** A walk in pages, with repair: the store's invariants (reconcile.ts) or the database's (db-reconcile.ts). */
export interface ReconcileWalker {
  page(cursor: string, count: number): Promise<WalkPage>;
}

interface WalkPage {
  cursor: string;
  users: number;
  conversations: number;
  findings: ReadonlyArray<{ kind: string }>;
  repaired: ReadonlyArray<{ kind: string }>;
  unrepaired: ReadonlyArray<{ kind: string }>;
}

const PAGE = 100;
const DEFAULT_GRACE_MS = 2_000;

/**
 * The periodic reconcile (RECONCILE_EVERY): a whole walk with repair, paced to `rate` ids per
 * second, then a pause of `everySeconds`, and again. Metrics count what it checked, found and
 * repaired (`redpoint_reconcile_*`, which should stay near zero); each repaired user or
 * conversation is one log line. A failed page (the store away) is logged and the walk goes on
 * from the same cursor after a pause. Run it in one process of a deployment: two would only do
 * the same work twice (repairs are idempotent).
 */
export class ReconcileJob {
  private stopped = false;
  private readonly abort = new AbortController();
  private running: Promise<void> | undefined;

  constructor(
    private readonly engine: Engine,
    private readonly admin: EngineAdmin,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    private readonly options: ReconcileJobOptions,
  ) {}

  start(): void {
    this.running ??= this.loop().catch((err: unknown) => {
      if (!this.stopped) this.log.error({ err }, 'reconcile job stopped');
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.running;
  }

  /** One whole walk (the loop's body; tests call it directly). */
  async walk(): Promise<void> {
    const graceMs = this.options.graceMs ?? DEFAULT_GRACE_MS;
    const store = new Reconciler(this.engine, this.admin, this.options.threshold, { repair: true, graceMs }, (subject, findings) =>
      this.logRepair(subject, findings),
    );
    await this.walkAll(store, '');
    if (this.options.againstDb && !this.stopped) await this.walkAll(this.options.againstDb(graceMs), 'database: ');
    if (!this.stopped) {
      this.metrics.reconcileRuns.inc();
      this.metrics.reconcileLastRun.set(Date.now() / 1000);
    }
  }

  private async walkAll(walker: ReconcileWalker, what: string): Promise<void> {
    let cursor = '';
    do {
      const started = performance.now();
      let page: WalkPage;
      try {
        page = await walker.page(cursor, PAGE);
      } catch (err) {
        this.log.warn({ err, cursor }, `reconcile ${what}page failed; retrying`);
        await this.pause(5_000);
        continue;
      }
      this.metrics.reconcileChecked.inc({ subject: 'users' }, page.users);
      this.metrics.reconcileChecked.inc({ subject: 'conversations' }, page.conversations);
      for (const f of page.findings) this.metrics.reconcileFindings.inc({ kind: f.kind });
      for (const f of page.repaired) this.metrics.reconcileRepaired.inc({ kind: f.kind });
      for (const f of page.unrepaired) {
        this.metrics.reconcileUnrepaired.inc({ kind: f.kind });
        this.log.error({ finding: f }, `reconcile ${what}could not repair`);
      }
      if (what !== '' && page.repaired.length > 0) this.log.warn({ repaired: page.repaired }, `reconcile ${what}repaired ${page.repaired.length}`);
      cursor = page.cursor;
      // Pace: a page of n ids takes at least n / rate seconds.
      const budget = ((page.users + page.conversations) / this.options.rate) * 1000;
      await this.pause(budget - (performance.now() - started));
    } while (cursor !== '' && !this.stopped);
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      await this.walk();
      await this.pause(this.options.everySeconds * 1000);
    }
  }

  private logRepair(subject: { kind: 'user' | 'conv'; id: string }, findings: readonly Finding[]): void {
    const kinds = [...new Set(findings.map((f) => f.kind))];
    const who = subject.kind === 'user' ? { uid: subject.id } : { conv: subject.id };
    this.log.warn(
      { ...who, kinds, findings: findings.map((f) => f.detail) },
      `reconcile repaired ${subject.kind === 'user' ? 'user' : 'conversation'} ${subject.id}: ${kinds.join(', ')}`,
    );
  }

  private async pause(ms: number): Promise<void> {
    if (ms <= 0 || this.stopped) return;
    await sleep(ms, undefined, { signal: this.abort.signal }).catch(() => undefined);
  }
}
