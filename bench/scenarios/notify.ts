import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import type { PushClient } from '../clients/types.js';
import { LatencyTracker } from '../lib/latency-tracker.js';
import { pace } from '../lib/pacer.js';
import { type CommitCounters, meanBatch, readCommitCounters } from '../lib/prom.js';
import type { NotifyResult, NotifyScenario } from '../lib/results.js';
import type { RunningSystem } from '../systems.js';
import { connectAll, type Population, populate } from './setup.js';

const MAX_IN_FLIGHT = 1000;
const SETTLE_MS = 200;

/**
 * One system's side of a notify scenario: N clients connected, messages POSTed at a fixed rate,
 * every client's push timed against the POST that caused it. The session stays connected across
 * rounds, so rounds of several systems can be interleaved; every round adds to one histogram.
 */
export class NotifySession {
  private readonly seqs = new Map<string, number>();
  private sent = 0;
  private measuredSent = 0;
  private measuredOk = 0;
  private stallP99Ms = NaN;
  private stallMaxMs = NaN;
  private postErrors = 0;
  private maxLagMs = 0;
  private postMs = 0;
  private pushMs = 0;

  private constructor(
    readonly system: RunningSystem,
    readonly scenario: NotifyScenario,
    private readonly tracker: LatencyTracker,
    private readonly population: Population,
    private readonly clients: PushClient[],
    private readonly before: CommitCounters | undefined,
  ) {}

  static async open(system: RunningSystem, scenario: NotifyScenario, tag: string): Promise<NotifySession> {
    const population = await populate(system.http, scenario, tag);
    const tracker = new LatencyTracker();
    const clients = await connectAll(system, population.clientUids, () => tracker.receiver());
    await delay(SETTLE_MS);
    const before = system.spec.redpoint ? await readCommitCounters(system.http) : undefined;
    return new NotifySession(system, scenario, tracker, population, clients, before);
  }

  /** Sends `seconds` of load; unmeasured (warm-up) or measured. Waits for its pushes (bounded). */
  async drive(seconds: number, measured: boolean, drainMs: number): Promise<void> {
    const { rate } = this.scenario;
    const total = Math.round(rate * seconds);
    if (total === 0) return;
    const sentBefore = this.measuredSent;
    const deliveredBefore = this.tracker.delivered;
    const roundStart = performance.now();
    // The load generator's own stalls (GC, a busy machine) add to every latency: watch them. A
    // fresh monitor per round: a re-enabled one would count the time it was off as one stall.
    const loop = monitorEventLoopDelay({ resolution: 1 });
    if (measured) loop.enable();
    const result = await pace({
      rate,
      total,
      maxInFlight: MAX_IN_FLIGHT,
      deadlineMs: seconds * 2000 + 5000,
      start: async () => {
        const i = this.sent++;
        const conv = this.population.convOf(i);
        const seq = (this.seqs.get(conv) ?? 0) + 1;
        this.seqs.set(conv, seq);
        this.tracker.markSent(conv, seq, performance.now(), measured);
        if (measured) this.measuredSent += 1;
        const reply = await this.system.http.send('POST', '/v1/messages', { conv, seq, sender: this.population.senderOf(i) });
        const ok = reply.status === 200;
        if (ok && measured) this.measuredOk += 1;
        return ok;
      },
    });
    loop.disable();
    const expected = deliveredBefore + (this.measuredSent - sentBefore) * this.fanout;
    const drainUntil = performance.now() + drainMs;
    while (measured && this.tracker.delivered < expected && performance.now() < drainUntil) await delay(5);
    if (!measured) return;
    this.postErrors += result.failed;
    this.maxLagMs = Math.max(this.maxLagMs, result.maxLagMs);
    if (loop.count > 0) {
      // Whole intervals are recorded: take off the 1 ms resolution to get the stall.
      this.stallP99Ms = Math.max(this.stallP99Ms || 0, loop.percentile(99) / 1e6 - 1);
      this.stallMaxMs = Math.max(this.stallMaxMs || 0, loop.max / 1e6 - 1);
    }
    // The schedule's length, or longer if the server (or the machine) could not keep up.
    this.postMs += Math.max(seconds * 1000, result.lastDoneAt - roundStart);
    this.pushMs += Math.max(seconds * 1000, this.tracker.lastDeliveryAt - roundStart);
  }

  /** Pushes one message causes: one per online member in the group, one in a 1:1 conversation. */
  private get fanout(): number {
    return this.scenario.kind === 'group' ? this.scenario.clients : 1;
  }

  /** Closes the clients and sums up every measured round. */
  async finish(): Promise<NotifyResult> {
    for (const c of this.clients) c.close();
    const after = this.before ? await readCommitCounters(this.system.http) : undefined;
    return {
      scenario: this.scenario,
      system: this.system.spec.id,
      latency: this.tracker.histogram.summary(),
      messagesPerSec: this.measuredOk / (Math.max(1, this.postMs) / 1000),
      pushesPerSec: this.tracker.delivered / (Math.max(1, this.pushMs) / 1000),
      expected: this.measuredSent * this.fanout,
      delivered: this.tracker.delivered,
      postErrors: this.postErrors,
      clientErrors: this.clients.reduce((n, c) => n + c.errors, 0),
      maxLagMs: this.maxLagMs,
      loopDelayP99Ms: this.stallP99Ms,
      loopDelayMaxMs: this.stallMaxMs,
      meanCommitBatch: this.before && after ? meanBatch(this.before, after) : undefined,
    };
  }

  /** Closes the clients without a result (a failed run). */
  abort(): void {
    for (const c of this.clients) c.close();
  }
}
