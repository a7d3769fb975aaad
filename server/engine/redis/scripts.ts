import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { THREAD_MARK } from '../../../protocol/child-id.js';
import { LIMITS } from '../../../protocol/limits.js';
import type { Reply } from './codec.js';
import { luaKeyNames } from './keys.js';
import { SETTING_REV_LUA } from './setting-text.js';
import { luaUserMeta } from './user-meta.js';

/** One function of the library: its file under lua/, its number of KEYS and how the engine treats it. */
interface ScriptSpec {
  file: string;
  keys: number;
  /**
   * Reads or starts the user's epoch (lib/user.lua userMeta/currentEpoch): its first ARGV is the
   * Redis run id, and RunTracker.userScript resends it (runs.ts), never the command guard.
   */
  user?: true;
  /**
   * Acknowledges no change to anyone (a read, or the durable tier's own bookkeeping): never
   * WAITs for replicas (command-guard.ts READ_SCRIPTS explains each).
   */
  read?: true;
  /**
   * `allow-cross-slot-keys`: the function may touch keys of several slots of the one master it
   * runs on (it reaches the others by name).
   */
  crossSlot?: true;
}

/**
 * Every Lua step of the engine, the operator's toolbox and the durable tier: ONE registry, ONE
 * Redis Functions library (FUNCTION LOAD, Redis 7.0+). The shared Lua (lua/lib/) is defined once
 * when the library loads, not re-run by every call as a prepended prelude was: each call pays
 * only for its own body. Redis < 7.0 has no Functions; the engine needs 7.0 anyway (it used
 * `#!lua flags=` before), so there is no EVAL fallback.
 */
export const SCRIPTS = {
  userApply: { file: 'user_apply.lua', keys: 1, user: true, crossSlot: true },
  pull: { file: 'pull.lua', keys: 6, user: true, read: true },
  userState: { file: 'user_state.lua', keys: 3, user: true, read: true },
  position: { file: 'position.lua', keys: 1, user: true, read: true },
  userClaim: { file: 'user_claim.lua', keys: 3 },
  convMembers: { file: 'conv_members.lua', keys: 2 },
  convRecord: { file: 'conv_record.lua', keys: 1, crossSlot: true },
  convFinishRewrite: { file: 'conv_finish_rewrite.lua', keys: 1 },
  readsRaise: { file: 'reads_raise.lua', keys: 2 },
  readsPeers: { file: 'reads_peers.lua', keys: 1, read: true, crossSlot: true },
  settingSet: { file: 'setting_set.lua', keys: 1 },
  // Threads (sync/threads.ts).
  threadAdd: { file: 'thread_add.lua', keys: 2 },
  // Topics (sync/topics.ts).
  topicAdd: { file: 'topic_add.lua', keys: 2 },
  topicReady: { file: 'topic_ready.lua', keys: 2 },
  // Either registry, topics' or threads'.
  registryList: { file: 'registry_list.lua', keys: 2, read: true },
  // The durable tier (server/durable/).
  userRestore: { file: 'durable/user_restore.lua', keys: 5, user: true },
  convRestore: { file: 'durable/conv_restore.lua', keys: 5 },
  // Many users of one shard per call: their keys by name (one slot on a cluster, any on one Redis).
  persistTake: { file: 'durable/persist_take.lua', keys: 1, read: true, crossSlot: true },
  persistClear: { file: 'durable/persist_clear.lua', keys: 1, read: true, crossSlot: true },
  persistClearConv: { file: 'durable/persist_clear_conv.lua', keys: 2, read: true },
  persistReadHeads: { file: 'durable/persist_read_heads.lua', keys: 1, read: true, crossSlot: true },
  persistClearHeads: { file: 'durable/persist_clear_heads.lua', keys: 1, read: true, crossSlot: true },
  coldEvict: { file: 'durable/cold_evict.lua', keys: 11, read: true },
  convEvict: { file: 'durable/conv_evict.lua', keys: 5, read: true },
  // The operator's toolbox (redis-admin.ts).
  adminUserRead: { file: 'admin/user_read.lua', keys: 5, read: true },
  adminUserRebuild: { file: 'admin/user_rebuild.lua', keys: 5, user: true },
  adminUserWipe: { file: 'admin/user_wipe.lua', keys: 8 },
  adminConvDelete: { file: 'admin/conv_delete.lua', keys: 2 },
  adminConvDeleteFinish: { file: 'admin/conv_delete_finish.lua', keys: 1 },
  adminConvRepair: { file: 'admin/conv_repair.lua', keys: 1 },
  adminConvRebase: { file: 'admin/conv_rebase.lua', keys: 2 },
  // The badge hook's bookkeeping (badge-marks.ts): a step a failover loses is done again (a
  // mark comes back, an event is delivered again), so none WAITs.
  hookClaim: { file: 'hook/claim.lua', keys: 3, read: true },
  hookRelease: { file: 'hook/release.lua', keys: 3, read: true },
  hookTakeConvs: { file: 'hook/take_convs.lua', keys: 2, read: true },
  hookMarkUsers: { file: 'hook/mark_users.lua', keys: 1, read: true },
  hookPresence: { file: 'hook/presence.lua', keys: 1, read: true },
  // Last: it runs convRecord's and userApply's bodies (the library defines them before it).
  ingestFlush: { file: 'ingest_flush.lua', keys: 1, user: true, crossSlot: true },
} as const satisfies Record<string, ScriptSpec>;

export type ScriptName = keyof typeof SCRIPTS;

/** The shared Lua, defined once at the top of the library, in this order (rebuild.lua uses user.lua). */
export const LIBRARY_PRELUDE = ['lib/user.lua', 'lib/rebuild.lua', 'lib/apply.lua'] as const;

type ScriptArg = string | number;

/** What defineScripts adds to the client: one method per function, keys first (string replies: every stored text is ASCII). */
export type ScriptCommands = {
  [K in ScriptName]: (...args: ScriptArg[]) => Promise<Reply>;
};

export type ScriptedRedis = Redis & ScriptCommands;
export type ScriptedCluster = Cluster & ScriptCommands;

/**
 * The .lua files (and lua/lib/) sit next to this module: in the source tree (tsx, vitest) and in
 * dist/, where `npm run build` copies them (tsc itself does not). No fallback to the source tree,
 * so a build that forgot them fails at startup instead of running scripts from another checkout.
 */
function luaDir(): string {
  return fileURLToPath(new URL('./lua/', import.meta.url));
}

function readLua(dir: string, file: string): string {
  const path = dir + file;
  if (!existsSync(path)) throw new Error(`Redis Lua script ${path} not found (a build must copy server/engine/redis/lua/ there, lib/ included: npm run build)`);
  const text = readFileSync(path, 'utf8');
  return text.endsWith('\n') ? text : `${text}\n`;
}

/** The library as FUNCTION LOAD takes it, its name, and each script's function name. */
export interface Library {
  name: string;
  source: string;
  functions: Record<ScriptName, string>;
}

/**
 * Builds the library: the shared Lua once, then each script's body as the callback of one
 * function (`KEYS` and `ARGV` are its parameters, so a body reads as the script it was), also
 * callable from a later body as `script_<name>(KEYS, ARGV)`. The
 * name carries a hash of the code: processes of two versions sharing a Redis (a rolling deploy)
 * each call their own functions, and loading never has to REPLACE what another process uses.
 */
export function buildLibrary(): Library {
  const dir = luaDir();
  const names = Object.keys(SCRIPTS) as ScriptName[];
  // The key names and the meta's layout first (rendered from keys.ts, user-meta.ts), then the shared Lua.
  // LIMITS the scripts use without an argument for them (conv_record.lua's @all seqs), generated.
  // THREAD_MARK (protocol/child-id.ts): a thread's row has its own default level (rules.ts defaultLevel).
  // SETTING_REV (setting-text.ts): where a setting's text keeps its revision.
  const limits = `-- scripts.ts: generated from protocol/limits.ts and protocol/child-id.ts.\nlocal MENTION_CAP = ${LIMITS.mentionSeqsPerConversation}\nlocal NOCOUNT_CAP = ${LIMITS.nocountSeqsPerConversation}\nlocal THREAD_MARK = '${THREAD_MARK}'\nlocal SETTING_REV = '${SETTING_REV_LUA}'\n`;
  const parts = [luaKeyNames(), luaUserMeta(), limits, ...LIBRARY_PRELUDE.map((file) => readLua(dir, file))];
  const bodies = names.map((name) => readLua(dir, SCRIPTS[name].file));
  const hash = createHash('sha1')
    .update([...parts, ...bodies].join('\0'))
    .digest('hex')
    .slice(0, 10);
  const functions = {} as Record<ScriptName, string>;
  names.forEach((name, i) => {
    const spec: ScriptSpec = SCRIPTS[name];
    const fn = `rp_${hash}_${name}`;
    functions[name] = fn;
    const flags = spec.crossSlot ? "'allow-cross-slot-keys'" : '';
    // A local of the library too, so that a function can run another's body (ingest_flush.lua).
    parts.push(
      `local function script_${name}(KEYS, ARGV)\nif not call then bindGlobals() end\n${bodies[i]}end\n` +
        `redis.register_function{function_name='${fn}', flags={${flags}}, callback=script_${name}}\n`,
    );
  });
  const libName = `redpoint_${hash}`;
  return { name: libName, source: `#!lua name=${libName}\n${parts.join('')}`, functions };
}

/** Loads the library on one server unless it has it (another process loaded it, or this one did before). */
async function loadLibrary(node: Redis, library: Library): Promise<void> {
  try {
    await node.call('FUNCTION', 'LOAD', library.source);
  } catch (err) {
    if (!(err instanceof Error && /already exists/i.test(err.message))) throw err;
  }
}

/** Loads the library on a server that lost it (a restart without persistence, FUNCTION FLUSH); cheap when it has it. */
export async function ensureLibrary(node: Redis, library: Library): Promise<void> {
  const listed = (await node.call('FUNCTION', 'LIST', 'LIBRARYNAME', library.name)) as unknown[];
  const has = listed.some((entry) => Array.isArray(entry) && entry[1] === library.name);
  if (!has) await loadLibrary(node, library);
}

/** The error of an FCALL to a function the server does not have. */
function isMissingFunction(err: unknown): boolean {
  return err instanceof Error && /Function not found/i.test(err.message);
}

/**
 * Adds a method per script to the client (an FCALL of its function: on a Cluster, routed by its
 * first key like any command) and loads the library on every master now, so a Lua error fails at
 * startup. A call that finds its function missing (the server restarted without persistence, or
 * was flushed) has not run: `reload` loads the library again and the call goes once more.
 */
export async function defineScripts(client: Redis | Cluster, masters: readonly Redis[], library: Library, reload: () => Promise<void>): Promise<void> {
  const target = client as unknown as Record<ScriptName, (...args: ScriptArg[]) => Promise<Reply>>;
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    const fn = library.functions[name];
    const keys = SCRIPTS[name].keys;
    target[name] = async (...args: ScriptArg[]): Promise<Reply> => {
      try {
        return (await client.fcall(fn, keys, ...args)) as Reply;
      } catch (err) {
        if (!isMissingFunction(err)) throw err;
        await reload();
        return (await client.fcall(fn, keys, ...args)) as Reply;
      }
    };
  }
  // A master that refuses writes (min-replicas-to-write unmet) refuses FUNCTION LOAD too: it
  // starts without the library, and each call answers NOREPLICAS (not applied) until it can load.
  await Promise.all(masters.map((node) => loadLibrary(node, library).catch((err: unknown) => (isNoReplicas(err) ? undefined : Promise.reject(err)))));
}

function isNoReplicas(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOREPLICAS');
}
