import { loadConfig } from '../../server/config.js';
import type { EngineOptions } from '../../server/engine/engine.js';
import { createRedisEngine, type RedisEngine } from '../../server/engine/redis/redis-engine.js';
import type { RedisTarget } from '../../server/redis-target.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { eachLimited } from '../lib/http.js';
import { BENCH_API_KEY, BENCH_JWT_SECRET } from '../systems.js';

/**
 * The engine driven in-process, with exactly the settings a server started with no tuning
 * variables would use (loadConfig's defaults): memory and store figures are those of a default
 * deployment.
 */
export function defaultEngineOptions(): EngineOptions & { largeGroupThreshold: number } {
  const c = loadConfig({ REDPOINT_API_KEY: BENCH_API_KEY, REDPOINT_JWT_SECRET: BENCH_JWT_SECRET });
  return {
    snapshotEvery: c.snapshotEvery,
    streamMaxLen: c.streamMaxLen,
    ...(c.streamIdleSeconds !== undefined ? { streamIdleSeconds: c.streamIdleSeconds } : {}),
    largeGroupThreshold: c.largeGroupThreshold,
  };
}

export interface InProcessStore {
  engine: RedisEngine;
  sync: SyncService;
  close(): Promise<void>;
}

export async function openInProcessStore(target: RedisTarget, storeTimeoutMs?: number): Promise<InProcessStore> {
  const options = defaultEngineOptions();
  const engine = await createRedisEngine({ ...target, ...options, ...(storeTimeoutMs !== undefined ? { storeTimeoutMs } : {}) });
  const sync = new SyncService(engine, { largeGroupThreshold: options.largeGroupThreshold });
  return { engine, sync, close: () => engine.close() };
}

/**
 * `users` users, each in `perUser` 1:1 conversations with other users of the set (user i with
 * i+1 … i+perUser/2, wrapping), so every (user, conversation) pair is a real member of a real
 * conversation: users × perUser pairs in users × perUser / 2 conversations.
 */
export interface DirectMesh {
  users: string[];
  convs: Array<{ conv: string; a: string; b: string }>;
  pairs: number;
}

export function directMesh(tag: string, users: number, perUser: number): DirectMesh {
  if (perUser % 2 !== 0 || perUser / 2 >= users) throw new Error(`directMesh: perUser must be even and below 2 × users (got ${perUser} for ${users})`);
  const uids = Array.from({ length: users }, (_, i) => `${tag}u${i}`);
  const convs: DirectMesh['convs'] = [];
  for (let i = 0; i < users; i++) {
    for (let j = 1; j <= perUser / 2; j++) convs.push({ conv: `${tag}c${i}-${j}`, a: uids[i] as string, b: uids[(i + j) % users] as string });
  }
  return { users: uids, convs, pairs: users * perUser };
}

export async function createMesh(sync: SyncService, mesh: DirectMesh, concurrency = 64): Promise<void> {
  await eachLimited(mesh.convs, concurrency, async ({ conv, a, b }) => {
    await sync.changeMembers(conv, { add: [a, b], remove: [] });
  });
}

/**
 * One message in every conversation of the mesh (seq `round`, sent alternately by either
 * member, as a chat goes), submitted in chunks so group commit flushes them together; no
 * conversation appears twice in a round, so nothing is merged away.
 */
export async function meshRound(sync: SyncService, mesh: DirectMesh, round: number, chunk = 250): Promise<void> {
  const messages = mesh.convs.map(({ conv, a, b }) => ({ conv, seq: round, sender: round % 2 === 1 ? a : b }));
  const submissions: Promise<void>[] = [];
  for (let i = 0; i < messages.length; i += chunk) submissions.push(sync.postMessages(messages.slice(i, i + chunk)));
  await Promise.all(submissions);
}
