import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { EngineOptions, UserOp } from '../../server/engine/engine.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { StoreError } from '../../server/engine/store-errors.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { type SentinelDeployment, startSentinel } from '../helpers/redis-sentinel.js';
import type { RedisServer } from '../helpers/redis-server.js';
import { join, message } from './conformance-helpers.js';

/**
 * The Redis engine behind real Sentinels (a master, two replicas, three Sentinels with
 * `down-after-milliseconds 1000`): it follows the master across a failover within a bound,
 * answers with typed errors in between, starts new epochs on the new master, and never writes to
 * a master that was demoted.
 */
const deployment: () => SentinelDeployment = fileFixture('Sentinel', () => startSentinel({ replicas: 2, downAfterMs: 1_000 }));
const OPTS: EngineOptions = { snapshotEvery: 3, streamMaxLen: 50 };
const STORE_TIMEOUT_MS = 1_000;
let prefixes = 0;

const sentinelEngine = (waitReplicas = 1): Promise<RedisEngine> =>
  createRedisEngine({
    sentinel: { sentinels: deployment().sentinelAddresses, name: deployment().name },
    ...OPTS,
    storeTimeoutMs: STORE_TIMEOUT_MS,
    prefix: `s${++prefixes}`,
    ...(waitReplicas > 0 ? { waitReplicas: { count: waitReplicas, timeoutMs: 500 } } : {}),
  });

const conversation = (uid: string, conv: string, from: number, n: number): UserOp[] => [
  join(uid, conv, 0, 'group'),
  ...Array.from({ length: n }, (_, i) => message(uid, conv, from + i)),
];

/** Successful FCALL (and EVAL*) calls a data node ran since its stats were last reset (replicas get effects, never scripts). */
async function scriptsRun(d: SentinelDeployment, node: RedisServer): Promise<number> {
  const probe = d.probe(node);
  try {
    const stats = await probe.info('commandstats');
    let n = 0;
    for (const m of stats.matchAll(/^cmdstat_(?:fcall|fcall_ro|evalsha|eval|evalsha_ro|eval_ro):calls=(\d+),.*?failed_calls=(\d+)/gm))
      n += Number(m[1]) - Number(m[2]);
    return n;
  } finally {
    probe.disconnect();
  }
}

describe('redis engine behind Sentinel', () => {
  it('follows a killed master to its promoted replica: typed errors in between, back within 6 s, a new epoch, nothing acknowledged lost', async () => {
    const d = deployment();
    const engine = await sentinelEngine(1);
    try {
      let seq = 0;
      await engine.applyUserOps(conversation('u', 'c', 1, 3));
      seq = 3;
      const before = await engine.position('u');
      const old = await d.master();
      const killedAt = Date.now();
      await old.kill();
      const failures: string[] = [];
      let slowest = 0;
      let backAt = 0;
      while (backAt === 0) {
        const started = Date.now();
        try {
          await engine.applyUserOps([message('u', 'c', seq + 1)]);
          seq += 1;
          backAt = Date.now();
        } catch (err) {
          // Every failure is a typed store error, answered within the store timeout (plus slack for a loaded machine).
          failures.push(err instanceof StoreError ? `${err.outcome}:${err.kind}` : `untyped: ${String(err)}`);
          slowest = Math.max(slowest, Date.now() - started);
          if (Date.now() - killedAt > 20_000) throw new Error(`not back within 20 s: ${failures.slice(-3).join(', ')}`);
          await delay(50);
        }
      }
      const after = await engine.position('u');
      const state = await engine.userState('u');
      console.log(
        `sentinel failover: back after ${backAt - killedAt} ms, ${failures.length} failed attempts (${[...new Set(failures)].join(', ')}), slowest ${slowest} ms`,
      );
      expect(
        failures.every((f) => !f.startsWith('untyped')),
        failures.join(', '),
      ).toBe(true);
      expect(slowest).toBeLessThan(STORE_TIMEOUT_MS + 1_500);
      expect(backAt - killedAt).toBeLessThan(6_000);
      expect(after.epoch).not.toBe(before.epoch);
      // WAIT 1: every acknowledged message reached the replica that is master now.
      expect(state.states.find((s) => s.conv === 'c')?.lastSeq).toBe(seq);
    } finally {
      await engine.close();
    }
  });

  it('a killed master that comes back is made a replica, and no script of the engine ever runs on it', async () => {
    const d = deployment();
    const engine = await sentinelEngine(1);
    try {
      const master = await d.master();
      const demoted = d.nodes.find((n) => n !== master && n.pid() === undefined);
      if (!demoted) throw new Error('expected the master killed by the test before');
      // The killed master restarts with its old config, saying it is a master, until the
      // Sentinels convert it; the engine keeps writing all along.
      let seq = 0;
      let writing = true;
      const writes = (async () => {
        while (writing) {
          await engine.applyUserOps(conversation('w', 'c', seq + 1, 1)).then(
            () => (seq += 1),
            () => delay(50),
          );
        }
      })();
      await demoted.restart();
      await d.waitReplica(demoted);
      const more = seq + 20;
      while (seq < more) await delay(20);
      writing = false;
      await writes;
      expect(await scriptsRun(d, demoted)).toBe(0);
      expect(await scriptsRun(d, master)).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });

  // Its timeout covers forceFailover's attempts (three, each up to 30 s refused as in progress and 25 s to promote), beyond the suite's 60 s.
  it('SENTINEL FAILOVER demotes the live master under the connection: the engine leaves it, and nothing acknowledged is lost', async () => {
    const d = deployment();
    const engine = await sentinelEngine(1);
    try {
      const old = await d.master();
      let seq = 0;
      let writing = true;
      const failures: string[] = [];
      const writes = (async () => {
        while (writing) {
          await engine.applyUserOps(conversation('f', 'c', seq + 1, 1)).then(
            () => (seq += 1),
            async (err: unknown) => {
              failures.push(err instanceof StoreError ? `${err.outcome}:${err.kind}` : `untyped: ${String(err)}`);
              await delay(50);
            },
          );
        }
      })();
      while (seq < 20) await delay(20);
      // The test before this one failed the master over too (forceFailover waits for its replica).
      const promoted = await d.forceFailover(old);
      await d.waitReplica(old);
      const ranOnOld = await scriptsRun(d, old);
      const more = seq + 20;
      while (seq < more) await delay(20);
      writing = false;
      await writes;
      console.log(`SENTINEL FAILOVER: failures ${[...new Set(failures)].join(', ') || 'none'}`);
      // Demoted: no script of ours ran on it from then on (a script sent just before is refused: READONLY).
      expect(await scriptsRun(d, old)).toBe(ranOnOld);
      expect(
        failures.every((f) => !f.startsWith('untyped')),
        failures.join(', '),
      ).toBe(true);
      const state = await engine.userState('f');
      expect(state.states.find((s) => s.conv === 'c')?.lastSeq).toBe(seq);
      expect(promoted).not.toBe(old);
    } finally {
      await engine.close();
    }
  }, 180_000);
});

describe('redis engine behind Sentinel: a master failed over and back', () => {
  const pair: () => SentinelDeployment = fileFixture('Sentinel (one replica)', () => startSentinel({ replicas: 1, downAfterMs: 1_000 }));

  /** The run_id of a data node's process (INFO server). */
  async function processRunId(d: SentinelDeployment, node: RedisServer): Promise<string | undefined> {
    const probe = d.probe(node);
    try {
      return /^run_id:(\w+)/m.exec(await probe.info('server'))?.[1];
    } finally {
      probe.disconnect();
    }
  }

  // Two forced failovers: each may take up to forceFailover's attempts (see the test above).
  it('the users it held start new epochs once it is master again: same process, same run_id, but it resynced as a replica and may have dropped writes', async () => {
    const d = pair();
    const engine = await createRedisEngine({
      sentinel: { sentinels: d.sentinelAddresses, name: d.name },
      ...OPTS,
      storeTimeoutMs: STORE_TIMEOUT_MS,
      prefix: `s${++prefixes}`,
    });
    try {
      await engine.applyUserOps(conversation('back', 'c', 1, 2));
      const before = await engine.position('back');
      const first = await d.master();
      const runId = await processRunId(d, first);
      // The user is left alone while the other node is master: only the fail-back can change its epoch.
      const other = await d.forceFailover(first);
      await d.waitReplica(first);
      expect(await d.forceFailover(other)).toBe(first);
      expect(await processRunId(d, first)).toBe(runId);
      const deadline = Date.now() + 20_000;
      for (;;) {
        try {
          await engine.applyUserOps([message('back', 'c', 3)]);
          break;
        } catch (err) {
          if (!(err instanceof StoreError) || Date.now() > deadline) throw err;
          await delay(50);
        }
      }
      const after = await engine.position('back');
      expect(after.epoch).not.toBe(before.epoch);
    } finally {
      await engine.close();
    }
  }, 180_000);
});
