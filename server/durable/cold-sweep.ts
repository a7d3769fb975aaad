import type { Logger } from 'pino';
import type { DurableStore } from '../engine/durable-backing.js';
import type { Metrics } from '../metrics/metrics.js';

/** Users looked at per shard per pass: a pass stays short, and a backlog of cold users goes over several passes. */
const PER_PASS = 500;
/** A conversation with more members is left in Redis: checking each member would make one pass long. */
const MAX_MEMBERS_CHECKED = 1_000;
/** Conversations whose head and generation are looked up in PostgreSQL per query. */
const CONVS_PER_QUERY = 500;

/** What the sweep asks PostgreSQL: which head and generation it holds for a conversation. */
export interface ConversationVersions {
  conversationVersions(convs: readonly string[]): Promise<Map<string, { maxSeq: string; gen: string }>>;
}

/**
 * Removes from Redis the users idle for `coldAfterSeconds` whose state PostgreSQL holds
 * (DESIGN.md §10), so Redis memory grows with active users, not registered ones. The check and
 * the removal are one atomic step per user (cold_evict.lua): a change landing first keeps the
 * user (its mark is not yet drained), and a touch landing after finds the user gone and restores
 * it from PostgreSQL. Any process may run it; two at once evict each user once.
 *
 * The conversations of the users it evicted go too when none of their members is left in Redis
 * and PostgreSQL holds exactly their head and roster generation (conv_evict.lua checks that again
 * atomically, with no mark waiting): the rosters of conversations nobody active is in were most of
 * what a cold population still held. Which members are cold is only a plain-read heuristic; a
 * conversation evicted while a member came back is restored on its next touch like any other.
 */
export class ColdSweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly store: DurableStore,
    private readonly pg: ConversationVersions,
    private readonly options: { coldAfterSeconds: number; sweepSeconds: number },
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {}

  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One pass over every shard; returns how many users it evicted. */
  async sweepOnce(now = Date.now()): Promise<number> {
    const before = now - this.options.coldAfterSeconds * 1000;
    let evicted = 0;
    const convs = new Set<string>();
    for (const shard of await this.store.busyShards(0, this.store.shardCount)) {
      const cold = await this.store.coldUsers(shard, before, PER_PASS);
      for (const uid of cold) {
        const { outcome, convs: theirs } = await this.store.evict(uid, before);
        if (outcome !== 1) continue;
        evicted++;
        for (const conv of theirs) convs.add(conv);
      }
    }
    if (evicted > 0) this.metrics.coldEvicted.inc({ kind: 'user' }, evicted);
    const gone = await this.evictConversations([...convs]);
    if (gone > 0) this.metrics.coldEvicted.inc({ kind: 'conversation' }, gone);
    return evicted;
  }

  /** Of `convs`, evicts those with no member left in Redis whose state PostgreSQL holds; returns how many. */
  private async evictConversations(convs: readonly string[]): Promise<number> {
    let gone = 0;
    for (let i = 0; i < convs.length; i += CONVS_PER_QUERY) {
      const part = convs.slice(i, i + CONVS_PER_QUERY);
      const found = await Promise.all(part.map(async (conv) => ({ conv, state: await this.store.evictableConversation(conv, MAX_MEMBERS_CHECKED) })));
      const candidates = found.filter((c): c is { conv: string; state: { head: string; gen: string } } => c.state !== null);
      if (candidates.length === 0) continue;
      const held = await this.pg.conversationVersions(candidates.map((c) => c.conv));
      for (const { conv, state } of candidates) {
        const row = held.get(conv);
        if (!row || row.maxSeq !== state.head || row.gen !== state.gen) continue;
        if (await this.store.evictConversation(conv, state.head, state.gen)) gone++;
      }
    }
    return gone;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.sweepOnce()
        .then(
          (n) => {
            if (n > 0) this.log.debug({ event: 'cold_sweep', evicted: n }, `cold sweep: ${n} users left Redis`);
          },
          (err: unknown) =>
            this.log.warn({ event: 'cold_sweep_failed', err: err instanceof Error ? err.message : String(err) }, 'cold sweep failed; it runs again'),
        )
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, this.options.sweepSeconds * 1000);
    this.timer.unref();
  }
}
