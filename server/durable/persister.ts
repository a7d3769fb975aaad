import type { Logger } from 'pino';
import type { DirtyMark, DirtyShard, DurableStore } from '../engine/durable-backing.js';
import type { Metrics } from '../metrics/metrics.js';
import type { PgStore } from './pg-store.js';

export interface PersisterOptions {
  intervalMs: number;
  /** Marks taken per shard per pass. */
  batch: number;
  backlogWarn: number;
}

/** Slots of a cluster looked at per pass for marks (a full round of 16,384 takes 16 passes). */
const CLUSTER_SHARDS_PER_PASS = 1_024;
const MAX_BACKOFF_MS = 5_000;
const MAX_BATCHES_PER_PASS = 32;
const CLUSTER_REPORT_EVERY_MS = 5_000;

/**
 * The write-behind drainer (DESIGN.md §10). Any process runs one; they need no coordination:
 * each pass takes the oldest dirty marks, reads the current state they name from Redis, writes
 * it to PostgreSQL in one transaction, and only then clears each mark whose record is still
 * exactly what was written. Two drainers on one mark write the same or a newer state (the
 * upserts merge), a crash between the upsert and the clear leaves the mark (written again
 * later, harmlessly), and a change landing in between keeps its mark. PostgreSQL's load follows
 * the changed pairs per pass, not the events: a record changed a hundred times between two
 * passes is one row.
 */
export class Persister {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private failures = 0;
  private databaseUp: boolean | undefined;
  private warned = false;
  private shardCursor = 0;
  private reportedAt = 0;

  constructor(
    private readonly store: DurableStore,
    private readonly pg: PgStore,
    private readonly options: PersisterOptions,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {}

  start(): void {
    this.schedule(0);
  }

  /** Stops after the pass in flight (its marks are cleared or left, never half). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One pass over every shard; resolves with the marks persisted. Exposed for tests and `redpoint persist`. */
  async drainOnce(): Promise<number> {
    let persisted = 0;
    for (const shard of await this.shards()) {
      // A full batch drains again at once, but a pass ends after a bound: marks that keep
      // changing under it must not hold one pass (and drainAll's deadline) forever.
      for (let batch = 0; batch < MAX_BATCHES_PER_PASS; batch++) {
        const n = await this.drainShard(shard);
        persisted += n.cleared;
        if (!n.full) break;
      }
    }
    return persisted;
  }

  /** Drains until nothing is left (or `deadline`): for tests, shutdown and `redpoint persist`. */
  async drainAll(deadline = Number.POSITIVE_INFINITY): Promise<void> {
    while (Date.now() < deadline) {
      // Every busy shard each round (a cluster's slot window would take 16 passes to cover them).
      const shards = await this.allShards();
      for (const shard of shards) {
        for (let batch = 0; batch < MAX_BATCHES_PER_PASS; batch++) if (!(await this.drainShard(shard)).full) break;
      }
      const { marks } = await this.store.backlog(shards);
      if (marks === 0) return;
    }
    throw new Error('the durable backlog did not drain before the deadline');
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.pass().finally(() => {
        this.running = undefined;
      });
    }, delayMs);
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    try {
      await this.drainOnce();
      await this.report();
      this.failures = 0;
      this.databaseState(true);
      this.schedule(this.options.intervalMs);
    } catch (err) {
      this.failures++;
      this.metrics.persistErrors.inc();
      this.databaseState(false, err);
      this.schedule(Math.min(MAX_BACKOFF_MS, this.options.intervalMs * 2 ** Math.min(this.failures, 8)));
    }
  }

  /** One log line per change of PostgreSQL's state, not one per failed pass. */
  private databaseState(up: boolean, err?: unknown): void {
    this.metrics.databaseUp.set(up ? 1 : 0);
    if (this.databaseUp === up) return;
    const first = this.databaseUp === undefined;
    this.databaseUp = up;
    if (up && !first) this.log.info({ event: 'database_up' }, 'durable tier: PostgreSQL answers again; draining the backlog');
    if (!up) {
      const reason = err instanceof Error ? err.message : String(err);
      this.log.warn({ event: 'database_down', err: reason }, 'durable tier: cannot write to PostgreSQL; changes wait in Redis and drain when it is back');
    }
  }

  private async report(): Promise<void> {
    // The gauge covers the whole store: on a cluster that is a look at all 16,384 slots, so it
    // is refreshed every few seconds rather than on every pass.
    const now = Date.now();
    if (this.store.shardCount > 1 && now - this.reportedAt < CLUSTER_REPORT_EVERY_MS) return;
    this.reportedAt = now;
    const { marks, oldest } = await this.store.backlog(await this.allShards());
    this.metrics.persistBacklog.set(marks);
    this.metrics.persistOldest.set(oldest === null ? 0 : Math.max(0, (Date.now() - oldest) / 1000));
    if (marks >= this.options.backlogWarn && !this.warned) {
      this.warned = true;
      this.log.warn({ event: 'persist_backlog', marks }, `durable tier: ${marks} changes wait for PostgreSQL in Redis memory`);
    } else if (marks < this.options.backlogWarn / 2) this.warned = false;
  }

  /** On a cluster, a window of slots per pass (those holding marks); on one Redis, its one shard. */
  private async shards(): Promise<DirtyShard[]> {
    if (this.store.shardCount === 1) return this.store.busyShards(0, 1);
    const start = this.shardCursor;
    this.shardCursor = (start + CLUSTER_SHARDS_PER_PASS) % this.store.shardCount;
    return this.store.busyShards(start, CLUSTER_SHARDS_PER_PASS);
  }

  private allShards(): Promise<DirtyShard[]> {
    return this.store.busyShards(0, this.store.shardCount);
  }

  private async drainShard(shard: DirtyShard): Promise<{ cleared: number; full: boolean }> {
    const { users, convs } = await this.store.dirty(shard, this.options.batch);
    const [u, c] = await Promise.all([this.drainUsers(users), this.drainConversations(convs)]);
    return { cleared: u + c, full: users.length >= this.options.batch || convs.length >= this.options.batch };
  }

  private async drainUsers(marks: readonly DirtyMark[]): Promise<number> {
    if (marks.length === 0) return 0;
    const byUser = new Map<string, string[]>();
    const since = new Map<string, number>();
    for (const mark of marks) {
      const bar = mark.member.indexOf('|');
      const uid = mark.member.slice(0, bar);
      const list = byUser.get(uid);
      if (list) list.push(mark.member.slice(bar + 1));
      else byUser.set(uid, [mark.member.slice(bar + 1)]);
      since.set(mark.member, mark.since);
    }
    const snapshots = await this.store.readUsers([...byUser].map(([uid, convs]) => ({ uid, convs })));
    const rows = await this.pg.writeUsers(snapshots);
    this.metrics.persistRows.inc({ kind: 'record' }, rows);
    const cleared = await this.store.clearUsers(snapshots);
    const now = Date.now();
    for (const mark of marks) this.metrics.persistLag.observe(Math.max(0, (now - mark.since) / 1000));
    return cleared;
  }

  private async drainConversations(marks: readonly DirtyMark[]): Promise<number> {
    if (marks.length === 0) return 0;
    const heads: string[] = [];
    const rosters: string[] = [];
    for (const { member } of marks) (member.startsWith('m|') ? rosters : heads).push(member.slice(2));
    let cleared = 0;
    // Heads: one statement for all of them.
    const read = await Promise.all(heads.map(async (conv) => ({ conv, head: await this.store.readHead(conv) })));
    const present = read.filter((h): h is { conv: string; head: string } => h.head !== null);
    await this.pg.writeHeads(present.map((h) => ({ conv: h.conv, maxSeq: Number(h.head) })));
    this.metrics.persistRows.inc({ kind: 'head' }, present.length);
    const headsCleared = await Promise.all(read.map((h) => this.store.clearConversation('h', h.conv, h.head ?? '')));
    cleared += headsCleared.filter(Boolean).length;
    // Rosters: one transaction each (a roster may be large, and is rewritten whole).
    for (const conv of rosters) {
      const state = await this.store.readConversation(conv);
      // Marked, yet gone from Redis: deleted (the toolbox deletes its rows itself), or lost since
      // the marks were read (a FLUSHALL or failover in the middle of this pass). Absence is no
      // evidence of a deletion, so PostgreSQL is left as it is: the next touch restores from it.
      if (state) {
        await this.pg.writeConversation(conv, state.state);
        this.metrics.persistRows.inc({ kind: 'conversation' });
      }
      if (await this.store.clearConversation('m', conv, state?.gen ?? '')) cleared++;
    }
    const now = Date.now();
    for (const mark of marks) this.metrics.persistLag.observe(Math.max(0, (now - mark.since) / 1000));
    return cleared;
  }
}
