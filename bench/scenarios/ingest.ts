import autocannon, { type AutocannonRequest, type AutocannonResult } from 'autocannon';
import { LatencyHistogram } from '../lib/histogram.js';
import { readCommitCounters } from '../lib/prom.js';
import type { IngestResult } from '../lib/results.js';
import { BENCH_API_KEY, type RunningSystem } from '../systems.js';
import { createDirectConversations, directConv, senderId } from './setup.js';

interface BatchTotals {
  histogram: LatencyHistogram;
  seconds: number;
  errors: number;
  non2xx: number;
  commitSum: number;
  commitCount: number;
}

/**
 * Ingest throughput on one system: autocannon saturates `POST /v1/messages` (closed loop, N
 * connections) with batches of messages to distinct 1:1 conversations, each message the next seq
 * of its conversation. No client is connected: this is the ingest path alone. Runs of the same
 * batch size add up, so they can be interleaved with other systems' runs.
 */
export class IngestSession {
  private readonly seqs: Int32Array;
  private cursor = 0;
  private readonly totals = new Map<number, BatchTotals>();

  private constructor(
    readonly system: RunningSystem,
    private readonly conversations: number,
    private readonly connections: number,
    private readonly tag: string,
  ) {
    this.seqs = new Int32Array(conversations);
  }

  static async open(system: RunningSystem, conversations: number, connections: number, tag: string): Promise<IngestSession> {
    await createDirectConversations(system.http, tag, conversations);
    return new IngestSession(system, conversations, connections, tag);
  }

  async run(batch: number, seconds: number, measured: boolean): Promise<void> {
    if (!measured) {
      await this.cannon(batch, seconds, new LatencyHistogram());
      return;
    }
    let t = this.totals.get(batch);
    if (!t) {
      t = { histogram: new LatencyHistogram(), seconds: 0, errors: 0, non2xx: 0, commitSum: 0, commitCount: 0 };
      this.totals.set(batch, t);
    }
    const before = this.system.spec.redpoint ? await readCommitCounters(this.system.http) : undefined;
    const result = await this.cannon(batch, seconds, t.histogram);
    if (before) {
      const after = await readCommitCounters(this.system.http);
      t.commitSum += after.sum - before.sum;
      t.commitCount += after.count - before.count;
    }
    t.seconds += Math.max(0.01, result.duration);
    t.errors += result.errors + result.timeouts;
    t.non2xx += result.non2xx;
  }

  result(batch: number): IngestResult | undefined {
    const t = this.totals.get(batch);
    if (!t) return undefined;
    const completed = t.histogram.count;
    return {
      system: this.system.spec.id,
      batch,
      connections: this.connections,
      requestsPerSec: completed / t.seconds,
      messagesPerSec: (completed * batch) / t.seconds,
      latency: t.histogram.summary(),
      errors: t.errors,
      non2xx: t.non2xx,
      meanCommitBatch: t.commitCount > 0 ? t.commitSum / t.commitCount : undefined,
    };
  }

  private nextBody(batch: number): string {
    const messages = [];
    for (let k = 0; k < batch; k++) {
      const i = this.cursor++ % this.conversations;
      const seq = (this.seqs[i] ?? 0) + 1;
      this.seqs[i] = seq;
      messages.push({ conv: directConv(this.tag, i), seq, sender: senderId(this.tag, i) });
    }
    return JSON.stringify(batch === 1 ? messages[0] : { messages });
  }

  private cannon(batch: number, seconds: number, histogram: LatencyHistogram): Promise<AutocannonResult> {
    const request: AutocannonRequest = {
      method: 'POST',
      path: '/v1/messages',
      headers: { authorization: `Bearer ${BENCH_API_KEY}`, 'content-type': 'application/json' },
      setupRequest: (req) => ({ ...req, body: this.nextBody(batch) }),
    };
    return new Promise((resolve, reject) => {
      const instance = autocannon(
        { url: `http://127.0.0.1:${this.system.port}`, connections: this.connections, duration: seconds, timeout: 10, requests: [request] },
        (err, result) => (err ? reject(err) : resolve(result)),
      );
      instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
        if (status === 200) histogram.recordMs(ms);
      });
    });
  }
}
