/**
 * What REDIS_WAIT_REPLICAS=1 costs ingest: one Redpoint process (one worker) on a master with one
 * replica on this machine, POST /v1/messages with one message per request from `CONCURRENCY`
 * loops, WAIT off and on in turns (off, on, off, on) so that a drift of the machine's load hits
 * both. Prints one line per run and the means. `npx tsx bench/wait-replicas-cost.ts` (about 50 s).
 */
import { createHistogram } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startRedisServer } from '../test/helpers/redis-server.js';
import { spawnServer } from '../test/helpers/server-process.js';
import { TEST_API_KEY } from '../test/helpers/test-server.js';

const CONCURRENCY = 32;
const WARM_MS = 2_000;
const MEASURE_MS = 8_000;
const auth = { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' };

const master = await startRedisServer();
const replica = await startRedisServer({ extraConfig: [`replicaof 127.0.0.1 ${master.port}`, 'repl-diskless-sync-delay 0'] });
const probe = new Redis(replica.url);
while (!/^master_link_status:up\r?$/m.test(await probe.info('replication'))) await delay(25);
probe.disconnect();

interface Run {
  wait: number;
  perSecond: number;
  p50: number;
  p99: number;
  failed: number;
  /** WAIT commands the master ran per acknowledged message (INFO commandstats). */
  waitsPerMessage: number;
}
const runs: Run[] = [];
try {
  for (const [i, wait] of [0, 1, 0, 1].entries()) {
    const server = await spawnServer({ REDIS_URL: master.url, REDIS_WAIT_REPLICAS: String(wait) });
    const stats = new Redis(master.url);
    try {
      const convs = Array.from({ length: CONCURRENCY }, (_, c) => `r${i}c${c}`);
      for (const conv of convs) {
        await fetch(`${server.url}/v1/conversations/${conv}/members`, {
          method: 'PUT',
          headers: auth,
          body: JSON.stringify({ add: [`${conv}a`, `${conv}b`] }),
        });
      }
      const histogram = createHistogram();
      let done = 0;
      let failed = 0;
      let measuring = false;
      const end = Date.now() + WARM_MS + MEASURE_MS;
      setTimeout(() => {
        measuring = true;
        stats.config('RESETSTAT').catch(() => undefined);
      }, WARM_MS);
      await Promise.all(
        convs.map(async (conv) => {
          for (let seq = 1; Date.now() < end; seq++) {
            const started = process.hrtime.bigint();
            const res = await fetch(`${server.url}/v1/messages`, { method: 'POST', headers: auth, body: JSON.stringify({ conv, seq, sender: `${conv}a` }) });
            await res.arrayBuffer();
            if (!measuring) continue;
            if (res.status !== 200) failed += 1;
            else done += 1;
            histogram.record(Number(process.hrtime.bigint() - started) || 1);
          }
        }),
      );
      const waits = Number(/^cmdstat_wait:calls=(\d+)/m.exec(await stats.info('commandstats'))?.[1] ?? 0);
      const run = {
        wait,
        perSecond: Math.round(done / (MEASURE_MS / 1000)),
        p50: histogram.percentile(50) / 1e6,
        p99: histogram.percentile(99) / 1e6,
        failed,
        waitsPerMessage: done > 0 ? waits / done : 0,
      };
      runs.push(run);
      console.log(
        `REDIS_WAIT_REPLICAS=${wait}: ${run.perSecond} messages/s, p50 ${run.p50.toFixed(2)} ms, p99 ${run.p99.toFixed(2)} ms, ${failed} failed, ${run.waitsPerMessage.toFixed(2)} WAITs per message`,
      );
    } finally {
      stats.disconnect();
      await server.stop();
    }
  }
} finally {
  await Promise.all([master.stop(), replica.stop()]);
}
for (const wait of [0, 1]) {
  const of = runs.filter((r) => r.wait === wait);
  const mean = (f: (r: Run) => number): number => of.reduce((n, r) => n + f(r), 0) / of.length;
  console.log(
    `mean REDIS_WAIT_REPLICAS=${wait}: ${Math.round(mean((r) => r.perSecond))} messages/s, p50 ${mean((r) => r.p50).toFixed(2)} ms, p99 ${mean((r) => r.p99).toFixed(2)} ms`,
  );
}
