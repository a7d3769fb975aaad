import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import type { UserOp } from '../../server/engine/engine.js';
import type { RedisEngine } from '../../server/engine/redis/redis-engine.js';
import { PROJECT_ROOT } from '../lib/child-server.js';
import { redisStats, statsDelta } from '../lib/redis-info.js';
import type { DirectMesh } from './engine-setup.js';

type MessageOp = Extract<UserOp, { type: 'message' }>;

/** Ops per applyUserOps call (distinct users), and calls in flight: enough to keep Redis busy. */
export const CHUNK = 500;
export const IN_FLIGHT = 8;

/**
 * Real 1:1 message ops for the users of a mesh: each chunk holds one op for each of `CHUNK`
 * consecutive users (one user step each, as a flush makes them), each op raising the user's
 * lastSeq in one of its conversations, every other one as the sender (readSeq too).
 */
export class OpSource {
  private cursor = 0;
  private readonly convsOf: string[][];

  constructor(private readonly mesh: DirectMesh) {
    const index = new Map(mesh.users.map((u, i) => [u, i]));
    this.convsOf = mesh.users.map(() => []);
    for (const { conv, a, b } of mesh.convs) {
      this.convsOf[index.get(a) as number]?.push(conv);
      this.convsOf[index.get(b) as number]?.push(conv);
    }
  }

  next(): MessageOp[] {
    const users = this.mesh.users.length;
    const ops: MessageOp[] = [];
    for (let k = 0; k < CHUNK; k++) {
      const n = this.cursor++;
      const i = n % users;
      const cycle = Math.floor(n / users);
      const convs = this.convsOf[i] ?? [];
      const seq = cycle + 1;
      ops.push({
        type: 'message',
        uid: this.mesh.users[i] as string,
        conv: convs[cycle % convs.length] as string,
        lastSeq: seq,
        readSeq: (i + cycle) % 2 === 0 ? seq : 0,
        mentionSeqs: [],
      });
    }
    return ops;
  }
}

/** What a store workload applies: a chunk of ops, resolved once Redis answered them all. */
export type ApplyChunk = (ops: readonly MessageOp[]) => Promise<void>;

/** As ingest calls it: the ops applied, no results wanted (the pushes carry the states). */
export function redpointApply(engine: RedisEngine): ApplyChunk {
  return async (ops) => {
    await engine.applyUserOps(ops, { results: false });
  };
}

const RAW_SCRIPT = readFileSync(join(PROJECT_ROOT, 'bench/baselines/store-raw.lua'), 'utf8');

/** The raw baseline: one EVALSHA of store-raw.lua per op, auto-pipelined like the engine's scripts. */
export async function rawApply(client: Redis): Promise<ApplyChunk> {
  const sha = (await client.script('LOAD', RAW_SCRIPT)) as string;
  return async (ops) => {
    await Promise.all(
      ops.map((op) => {
        const tag = `raw:{u:${op.uid}}`;
        const record = `1000|${op.lastSeq}|${op.readSeq}|-1|1|1|default|`;
        const entry = `${op.conv}|000|${op.lastSeq}|${op.readSeq}|0|-1|default`;
        return client.evalsha(sha, 3, `${tag}:c`, `${tag}:m`, `${tag}:s`, op.conv, record, entry, `raw:bus:{u:${op.uid}}`);
      }),
    );
  };
}

export interface StoreTotals {
  ops: number;
  seconds: number;
  redisCpuSeconds: number;
  /** The same per server (the masters of a cluster: how the load spread). */
  serverCpuSeconds: number[];
  /** cmdstat_evalsha over the measured windows: calls and µs inside Redis. */
  evalshaCalls: number;
  evalshaUsec: number;
  clientCpuMicros: number;
}

export const emptyTotals = (): StoreTotals => ({
  ops: 0,
  seconds: 0,
  redisCpuSeconds: 0,
  serverCpuSeconds: [],
  evalshaCalls: 0,
  evalshaUsec: 0,
  clientCpuMicros: 0,
});

/**
 * Closed loop for `seconds`: `IN_FLIGHT` chunks at a time, each replaced as soon as it is
 * answered. With `into`, the window's ops, time, Redis CPU (INFO of every server in `stats`),
 * EVALSHA cost and this process's CPU are added to it.
 */
export async function storeWindow(apply: ApplyChunk, source: OpSource, seconds: number, servers: readonly Redis[], into?: StoreTotals): Promise<void> {
  const before = into ? await Promise.all(servers.map(redisStats)) : undefined;
  const cpu = process.cpuUsage();
  const started = performance.now();
  const end = started + seconds * 1000;
  let ops = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < end) {
        const chunk = source.next();
        await apply(chunk);
        ops += chunk.length;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  if (!into || !before) return;
  const after = await Promise.all(servers.map(redisStats));
  after.forEach((a, i) => {
    const d = statsDelta(before[i] ?? a, a);
    const evalsha = d.command('evalsha');
    into.redisCpuSeconds += d.cpuSeconds;
    into.serverCpuSeconds[i] = (into.serverCpuSeconds[i] ?? 0) + d.cpuSeconds;
    into.evalshaCalls += evalsha.calls;
    into.evalshaUsec += evalsha.usec;
  });
  into.ops += ops;
  into.seconds += elapsed;
  into.clientCpuMicros += used.user + used.system;
}

export function perOp(t: StoreTotals): {
  opsPerSec: number;
  redisCpuUs: number;
  evalshaUsPerOp: number;
  evalshaUsPerCall: number;
  callsPerOp: number;
  clientCpuUs: number;
} {
  return {
    opsPerSec: t.ops / Math.max(1e-3, t.seconds),
    redisCpuUs: (t.redisCpuSeconds * 1e6) / Math.max(1, t.ops),
    evalshaUsPerOp: t.evalshaUsec / Math.max(1, t.ops),
    evalshaUsPerCall: t.evalshaUsec / Math.max(1, t.evalshaCalls),
    callsPerOp: t.evalshaCalls / Math.max(1, t.ops),
    clientCpuUs: t.clientCpuMicros / Math.max(1, t.ops),
  };
}
