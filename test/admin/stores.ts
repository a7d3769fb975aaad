import { once } from 'node:events';
import { Cluster, Redis } from 'ioredis';
import { LocalToolbox } from '../../server/admin/toolbox.js';
import { adminOf } from '../../server/engine/admin.js';
import type { Engine, EngineOptions } from '../../server/engine/engine.js';
import { dropNewestEntries } from '../../server/engine/memory/entry-log.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { type MemoryConversation, type MemoryUser, putRecord, recordOf } from '../../server/engine/memory/memory-state.js';
import { tableDelete, tableHas } from '../../server/engine/memory/text-table.js';
import { convKey, userKeys } from '../../server/engine/redis/keys.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import type { StoredConv } from '../../server/engine/rules.js';
import { decodeRecord, encodeRecord } from '../../server/engine/state-text.js';
import type { RedisNodeAddress } from '../../server/redis-target.js';
import { setCounter } from '../helpers/user-meta.js';

/**
 * A store for the toolbox suites: an engine, its toolbox, and hands that corrupt it the way a
 * crash, a bug or an operator's mistake would (behind the engine's back), plus a look at every
 * key (or map entry) that still names a user.
 */
export interface TestStore {
  engine: Engine;
  toolbox: LocalToolbox;
  corrupt: {
    setStoredTotal(uid: string, total: number): Promise<void>;
    removeRecord(uid: string, conv: string): Promise<void>;
    setRecord(uid: string, rec: StoredConv): Promise<void>;
    /** Drops the newest `n` entries of the stream: its head is then behind the version. */
    dropStreamTail(uid: string, n: number): Promise<void>;
    removeMember(conv: string, uid: string): Promise<void>;
  };
  /** Every key (memory: every map entry) that holds the user's id in its name or as a field. */
  traces(uid: string): Promise<string[]>;
  readRecord(uid: string, conv: string): Promise<StoredConv | null>;
  cleanup(): Promise<void>;
}

export const STORE_OPTIONS: EngineOptions = { snapshotEvery: 4, streamMaxLen: 40, streamIdleSeconds: 0 };
export const THRESHOLD = 3;

export function memoryStore(): TestStore {
  const engine = new MemoryEngine(STORE_OPTIONS);
  const inner = engine as unknown as { users: Map<string, MemoryUser>; conversations: Map<string, MemoryConversation>; claims: Map<string, unknown> };
  const user = (uid: string): MemoryUser => {
    const u = inner.users.get(uid);
    if (!u) throw new Error(`no user ${uid}`);
    return u;
  };
  return {
    engine,
    toolbox: new LocalToolbox(engine, adminOf(engine), { ...STORE_OPTIONS, largeGroupThreshold: THRESHOLD }),
    corrupt: {
      async setStoredTotal(uid, total) {
        user(uid).total = total;
      },
      async removeRecord(uid, conv) {
        const u = user(uid);
        u.records = tableDelete(u.records, conv);
      },
      async setRecord(uid, rec) {
        putRecord(user(uid), rec);
      },
      async dropStreamTail(uid, n) {
        dropNewestEntries(user(uid), n);
      },
      async removeMember(conv, uid) {
        const c = inner.conversations.get(conv);
        if (c) c.members = tableDelete(c.members, uid);
      },
    },
    async traces(uid) {
      const out: string[] = [];
      if (inner.users.has(uid)) out.push(`user ${uid}`);
      if (inner.claims.has(uid)) out.push(`claims of ${uid}`);
      for (const [conv, c] of inner.conversations) if (tableHas(c.members, uid)) out.push(`member of ${conv}`);
      return out;
    },
    async readRecord(uid, conv) {
      const u = inner.users.get(uid);
      return (u && recordOf(u, conv)) ?? null;
    },
    async cleanup() {
      await engine.close();
    },
  };
}

let prefixes = 0;

/** A Redis store under a prefix of its own, on one redis-server (`url`) or a cluster (`cluster`). */
export async function redisStore(target: { url: string } | { cluster: readonly RedisNodeAddress[] }): Promise<TestStore> {
  const prefix = `adm${process.pid}x${++prefixes}`;
  const engine = await createRedisEngine({ ...target, ...STORE_OPTIONS, prefix });
  const raw = 'url' in target ? new Redis(target.url) : new Cluster([...target.cluster]);
  const masters = async (): Promise<Redis[]> => {
    if (!(raw instanceof Cluster)) return [raw];
    if (raw.status !== 'ready') await once(raw, 'ready');
    return raw.nodes('master');
  };
  return {
    engine,
    toolbox: new LocalToolbox(engine, adminOf(engine), { ...STORE_OPTIONS, largeGroupThreshold: THRESHOLD }),
    corrupt: {
      async setStoredTotal(uid, total) {
        await setCounter(raw, userKeys(prefix, uid).meta, 'total', total);
      },
      async removeRecord(uid, conv) {
        await raw.hdel(userKeys(prefix, uid).records, conv);
      },
      async setRecord(uid, rec) {
        await raw.hset(userKeys(prefix, uid).records, rec.conv, encodeRecord(rec));
      },
      async dropStreamTail(uid, n) {
        await raw.rpop(userKeys(prefix, uid).stream, n);
      },
      async removeMember(conv, uid) {
        await raw.hdel(convKey(prefix, conv), uid);
      },
    },
    async traces(uid) {
      const out: string[] = [];
      for (const node of await masters()) {
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
          cursor = next;
          for (const key of keys) {
            if (key.includes(`{u:${uid}}`)) out.push(key);
            else if ((await node.type(key)) === 'hash' && (await node.hexists(key, uid)) === 1) out.push(`${key} field ${uid}`);
          }
        } while (cursor !== '0');
      }
      return out;
    },
    async readRecord(uid, conv) {
      const text = await raw.hget(userKeys(prefix, uid).records, conv);
      return text === null ? null : decodeRecord(conv, text);
    },
    async cleanup() {
      raw.disconnect();
      await engine.close();
    },
  };
}
