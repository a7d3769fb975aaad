import type { Logger } from 'pino';
import type { DirtyMark, DirtyShard, DurableStore, PersistedConversation, TakenRecord } from '../engine/durable-backing.js';
import type { Metrics } from '../metrics/metrics.js';
import type { PgStore } from './pg-store.js';

export interface PersisterOptions {
  intervalMs: number;
  /** Marks taken per shard per pass. */
  batch: number;
  backlogWarn: number;
  /** Rosters per PostgreSQL transaction, and the members they may hold together (at least one roster). */
  rosterBatch?: { rosters: number; members: number };
}

/** Slots of a cluster looked at per pass for marks (a full round of 16,384 takes 16 passes). */
const CLUSTER_SHARDS_PER_PASS = 1_024;
const MAX_BACKOFF_MS = 5_000;
const MAX_BATCHES_PER_PASS = 32;
/**
 * Records per upsert statement, and how many such chunks one shard's drain keeps in flight
 * (below the pool's size, so restores still get a connection). Exported for the bench's baseline.
 */
export const DRAIN_PIPELINE = { recordsPerChunk: 1_000, chunksInFlight: 3 } as const;
const CLUSTER_REPORT_EVERY_MS = 5_000;
/**
 * How long one pass spends on rosters. The next pass starts only when this one's rosters are
 * done: under a burst of membership changes (the durable bench creates 5,000 conversations at
 * once), with one transaction per roster, passes took ~15 s, and the users' records changed
 * meanwhile waited that long in Redis alone. The rosters left go in the next passes.
 */
const ROSTER_MS_PER_PASS = 250;
/** Rosters per transaction (a few statements for the whole batch), and the members they may hold together. */
const ROSTER_BATCH = { rosters: 200, members: 20_000 } as const;
/** Rosters read from Redis together while a batch fills, at least (more when those read so far were small). */
const ROSTER_READS_AT_ONCE = 8;

/** A roster as the drainer read it from Redis (null: gone from Redis). */
type RosterRead = Awaited<ReturnType<DurableStore['readConversation']>>;

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
  private readonly rosterBatch: { rosters: number; members: number };

  constructor(
    private readonly store: DurableStore,
    private readonly pg: PgStore,
    private readonly options: PersisterOptions,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    this.rosterBatch = options.rosterBatch ?? ROSTER_BATCH;
  }

  /** Starts passes (again, after stop()). */
  start(): void {
    this.stopped = false;
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
      persisted += await this.drainShard(shard, this.options.batch * MAX_BATCHES_PER_PASS);
    }
    return persisted;
  }

  /** Drains until nothing is left (or `deadline`): for tests, shutdown and `redpoint persist`. */
  async drainAll(deadline = Number.POSITIVE_INFINITY): Promise<void> {
    while (Date.now() < deadline) {
      // Every busy shard each round (a cluster's slot window would take 16 passes to cover them).
      const shards = await this.allShards();
      for (const shard of shards) await this.drainShard(shard, this.options.batch * MAX_BATCHES_PER_PASS);
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

  /** One log line per change of PostgreSQL's state, not one per failed pass (the gauge reads PostgreSQL itself when scraped). */
  private databaseState(up: boolean, err?: unknown): void {
    if (this.databaseUp === up) return;
    const first = this.databaseUp === undefined;
    this.databaseUp = up;
    if (up && !first) this.log.info({ event: 'database_up' }, 'durable tier: PostgreSQL answers again; draining the backlog');
    if (!up) {
      const reason = err instanceof Error ? err.message : String(err);
      this.log.warn({ event: 'database_down', err: reason }, 'durable tier: cannot write to PostgreSQL; changes wait in Redis and drain when it is back');
    }
  }

  /** The backlog warning. The gauges read the backlog themselves when scraped (Metrics.durable). */
  private async report(): Promise<void> {
    // The whole store: on a cluster that is a look at all 16,384 slots, so every few seconds
    // rather than on every pass.
    const now = Date.now();
    if (this.store.shardCount > 1 && now - this.reportedAt < CLUSTER_REPORT_EVERY_MS) return;
    this.reportedAt = now;
    const { marks } = await this.store.backlog(await this.allShards());
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

  /**
   * One shard's marks, up to `budget` of each kind. Users' records go through a pipeline of
   * chunks: while one chunk's upsert runs in PostgreSQL, the next is read from Redis and the one
   * before is cleared, so PostgreSQL is kept busy instead of waiting on Redis round trips. Each
   * mark is in one chunk at a time (a chunk in flight hides its marks from the next read), and
   * chunks write distinct rows, so their transactions never wait on each other.
   */
  private async drainShard(shard: DirtyShard, budget: number): Promise<number> {
    // Settled both before failing: a pass that threw must have nothing of it still running.
    const [u, c] = await Promise.allSettled([this.drainUserShard(shard, budget), this.drainConvShard(shard, budget)]);
    if (u.status === 'rejected') throw u.reason;
    if (c.status === 'rejected') throw c.reason;
    return u.value + c.value;
  }

  private async drainUserShard(shard: DirtyShard, most: number): Promise<number> {
    // A pass takes at most as many marks as the shard held when it began. Marks go oldest first and
    // a change moves its record's mark to the back, so the pass takes what was waiting when it
    // began, and a record changed meanwhile waits for the next pass instead of being written again
    // and again in this one: under load the drain writes each busy record once per pass.
    const held = await this.store.recordMarks(shard);
    if (held === 0) return 0;
    const budget = Math.min(most, held);
    const chunk = Math.min(this.options.batch, DRAIN_PIPELINE.recordsPerChunk);
    const inFlight = new Set<string>();
    const running = new Set<Promise<void>>();
    // Marks of the chunks in flight whose clear is not sent yet: all still in the set, and the
    // oldest in it (taken from its front), so a take skips as many. A clear sent goes to Redis
    // before any later take (one connection, in order); what it keeps (records changed since)
    // stays at the front without being counted, so a take may see such a mark again (the filter
    // drops it while its chunk is in flight) but never skips one it has not seen.
    let uncleared = 0;
    let taken = 0;
    let cleared = 0;
    let exhausted = false;
    let failure: { err: unknown } | undefined;
    // Records taken ahead for the next chunks: one take feeds every chunk that fits in flight.
    let queue: TakenRecord[] = [];
    while (taken < budget && failure === undefined) {
      while (running.size >= DRAIN_PIPELINE.chunksInFlight) await Promise.race(running);
      if (failure !== undefined) break;
      if (queue.length === 0) {
        if (exhausted) break;
        const want = Math.min(chunk * (DRAIN_PIPELINE.chunksInFlight - running.size), budget - taken);
        const records = await this.store.takeRecords(shard, uncleared, want);
        // Fewer than asked for: the set holds nothing past these.
        if (records.length < want) exhausted = true;
        queue = records.filter((r) => !inFlight.has(r.member));
        if (queue.length === 0) {
          if (exhausted || running.size === 0) break;
          // Only marks still in flight came back: take again once a chunk is done with them.
          await Promise.race(running);
          continue;
        }
      }
      const fresh = queue.splice(0, Math.min(chunk, budget - taken));
      taken += fresh.length;
      uncleared += fresh.length;
      for (const r of fresh) inFlight.add(r.member);
      let clearing = false;
      const done: Promise<void> = this.drainRecords(shard, fresh, () => {
        clearing = true;
        uncleared -= fresh.length;
      })
        .then(
          (n) => {
            cleared += n;
          },
          (err: unknown) => {
            failure ??= { err };
          },
        )
        .finally(() => {
          if (!clearing) uncleared -= fresh.length;
          for (const r of fresh) inFlight.delete(r.member);
          running.delete(done);
        });
      running.add(done);
    }
    await Promise.all(running);
    if (failure !== undefined) throw failure.err;
    return cleared;
  }

  private async drainConvShard(shard: DirtyShard, budget: number): Promise<number> {
    let cleared = 0;
    const rostersUntil = performance.now() + ROSTER_MS_PER_PASS;
    for (let taken = 0; taken < budget; ) {
      const want = Math.min(this.options.batch, budget - taken);
      const { convs } = await this.store.dirty(shard, want, 'convs');
      if (convs.length === 0) return cleared;
      const done = await this.drainConversations(shard, convs, rostersUntil);
      cleared += done.cleared;
      if (done.deferred) return cleared;
      taken += convs.length;
      if (convs.length < want) return cleared;
    }
    return cleared;
  }

  /** One chunk: upserted, then its marks cleared; `clearing` runs just before the clear is sent. */
  private async drainRecords(shard: DirtyShard, records: readonly TakenRecord[], clearing: () => void): Promise<number> {
    if (records.length === 0) return 0;
    const rows = await this.pg.writeRecords(records);
    this.metrics.persistRows.inc({ kind: 'record' }, rows);
    clearing();
    const cleared = await this.store.clearRecords(shard, records);
    const now = Date.now();
    for (const r of records) this.metrics.persistLag.observe(Math.max(0, (now - r.w) / 1000));
    return cleared;
  }

  /** `deferred`: rosters left marked for a later pass, past `rostersUntil` (performance.now()). */
  private async drainConversations(shard: DirtyShard, marks: readonly DirtyMark[], rostersUntil: number): Promise<{ cleared: number; deferred: boolean }> {
    if (marks.length === 0) return { cleared: 0, deferred: false };
    const heads: string[] = [];
    const rosters: string[] = [];
    for (const { member } of marks) (member.startsWith('m|') ? rosters : heads).push(member.slice(2));
    let cleared = 0;
    // Heads: one read of Redis, one statement, one clear for all of them.
    const values = await this.store.readHeads(shard, heads);
    const present = heads.flatMap((conv, i) => {
      const value = values[i];
      return value ? [{ conv, maxSeq: Number(value.head), gen: value.gen, at: value.at, mentionAll: value.mentionAll, nocount: value.nocount }] : [];
    });
    await this.pg.writeHeads(present);
    this.metrics.persistRows.inc({ kind: 'head' }, present.length);
    cleared += await this.store.clearHeads(
      shard,
      heads.map((conv, i) => ({ conv, head: values[i]?.head ?? null })),
    );
    // Rosters: batches, each one transaction (a roster is rewritten whole). At least one batch
    // per pass, so they always move.
    let written = 0;
    while (written < rosters.length && (written === 0 || performance.now() <= rostersUntil)) {
      const batch = await this.readRosterBatch(rosters, written);
      // Marked, yet gone from Redis: deleted (the toolbox deletes its rows itself), or lost since
      // the marks were read (a FLUSHALL or failover in the middle of this pass). Absence is no
      // evidence of a deletion, so PostgreSQL is left as it is: the next touch restores from it.
      const present: Array<{ conv: string; state: PersistedConversation }> = [];
      for (const { conv, read } of batch) if (read) present.push({ conv, state: read.state });
      await this.pg.writeConversations(present);
      this.metrics.persistRows.inc({ kind: 'conversation' }, present.length);
      const clears = await Promise.all(batch.map(({ conv, read }) => this.store.clearConversation('m', conv, read?.version ?? null)));
      for (const done of clears) if (done) cleared++;
      written += batch.length;
    }
    const now = Date.now();
    // The rosters not written are the last of `rosters`, in the marks' order: their lag is not over.
    let rosterMarks = 0;
    for (const mark of marks) {
      if (mark.member.startsWith('m|') && rosterMarks++ >= written) continue;
      this.metrics.persistLag.observe(Math.max(0, (now - mark.since) / 1000));
    }
    return { cleared, deferred: written < rosters.length };
  }

  /**
   * The rosters of one batch, from `rosters[from]` on, as Redis holds them (null: gone): read a
   * few at a time until the batch's rosters or members are reached, since a roster may hold 100k
   * members and a batch must not read hundreds of those at once. Each read takes as many as the
   * members read so far say fit (ROSTER_READS_AT_ONCE first): small rosters in one go.
   */
  private async readRosterBatch(rosters: readonly string[], from: number): Promise<Array<{ conv: string; read: RosterRead }>> {
    const { rosters: most, members: memberBound } = this.rosterBatch;
    const batch: Array<{ conv: string; read: RosterRead }> = [];
    let members = 0;
    while (batch.length < most && from + batch.length < rosters.length && (batch.length === 0 || members < memberBound)) {
      const fit = batch.length === 0 ? ROSTER_READS_AT_ONCE : Math.floor((memberBound - members) / Math.max(1, members / batch.length));
      const next = rosters.slice(from + batch.length, from + Math.min(most, batch.length + Math.max(ROSTER_READS_AT_ONCE, fit)));
      const reads = await Promise.all(next.map((conv) => this.store.readConversation(conv)));
      reads.forEach((read, i) => {
        batch.push({ conv: next[i] as string, read });
        members += read?.state.members.length ?? 0;
      });
    }
    return batch;
  }
}
