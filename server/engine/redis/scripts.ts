import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import type { Reply } from './codec.js';

/** What scripts.ts loads for one script: its file, number of KEYS and the lib/ files prepended. */
interface ScriptSpec {
  file: string;
  keys: number;
  /** Shared Lua (under lua/lib/) prepended to the script body, in this order. */
  prelude?: readonly string[];
  /**
   * Script flags (a `#!lua flags=...` first line). `allow-cross-slot-keys`: the script may touch
   * keys of several slots of the one master it runs on (Redis 7); it reaches the others by name.
   */
  flags?: string;
}

/**
 * The prelude of every user script: userMeta, the record/state codecs, snapshots (lib/user.lua).
 * Every script with it carries a run id (see runs.ts).
 */
export const USER_PRELUDE = 'lib/user.lua';
const USER = [USER_PRELUDE] as const;
const USER_REBUILD = [USER_PRELUDE, 'lib/rebuild.lua'] as const;

/** Every Lua script, by the name ioredis defines it under, and its number of KEYS. */
export const SCRIPTS = {
  userApply: { file: 'user_apply.lua', keys: 1, prelude: USER, flags: 'allow-cross-slot-keys' },
  pull: { file: 'pull.lua', keys: 5, prelude: USER },
  userState: { file: 'user_state.lua', keys: 2, prelude: USER },
  position: { file: 'position.lua', keys: 1, prelude: USER },
  convMembers: { file: 'conv_members.lua', keys: 2 },
  convRecord: { file: 'conv_record.lua', keys: 1, flags: 'allow-cross-slot-keys' },
  convFinishRewrite: { file: 'conv_finish_rewrite.lua', keys: 1 },
  // The durable tier (server/durable/).
  userRestore: { file: 'durable/user_restore.lua', keys: 5, prelude: USER_REBUILD },
  convRestore: { file: 'durable/conv_restore.lua', keys: 1 },
  persistRead: { file: 'durable/persist_read.lua', keys: 2 },
  persistClear: { file: 'durable/persist_clear.lua', keys: 2 },
  persistClearConv: { file: 'durable/persist_clear_conv.lua', keys: 2 },
  coldEvict: { file: 'durable/cold_evict.lua', keys: 8 },
} as const satisfies Record<string, ScriptSpec>;

export type ScriptName = keyof typeof SCRIPTS;

type ScriptArg = string | number;

/** What ioredis adds for each `defineCommand` (string replies: every stored text is ASCII). */
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
export function luaDir(): string {
  return fileURLToPath(new URL('./lua/', import.meta.url));
}

export function readLua(dir: string, file: string): string {
  const path = dir + file;
  if (!existsSync(path)) throw new Error(`Redis Lua script ${path} not found (a build must copy server/engine/redis/lua/ there, lib/ included: npm run build)`);
  const text = readFileSync(path, 'utf8');
  return text.endsWith('\n') ? text : `${text}\n`;
}

/** Each script's source as Redis runs it: its prelude files, then its body. */
export function loadScriptSources(): Record<ScriptName, string> {
  const dir = luaDir();
  const out = {} as Record<ScriptName, string>;
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    const spec: ScriptSpec = SCRIPTS[name];
    const shebang = spec.flags ? `#!lua flags=${spec.flags}\n` : '';
    out[name] = shebang + [...(spec.prelude ?? []), spec.file].map((file) => readLua(dir, file)).join('');
  }
  return out;
}

/** The SHA1 of each script, in SCRIPTS order (what EVALSHA and SCRIPT EXISTS take). */
export function scriptShas(sources: Record<ScriptName, string>): string[] {
  return (Object.keys(SCRIPTS) as ScriptName[]).map((name) => createHash('sha1').update(sources[name]).digest('hex'));
}

/**
 * Defines every script on the client (ioredis then calls them by sha and falls back to EVAL after
 * a NOSCRIPT, e.g. once Redis restarted; on a Cluster, per node connection) and loads them now on
 * every master, so a Lua error fails at startup.
 */
export async function defineScripts(client: Redis | Cluster, masters: readonly Redis[], sources: Record<ScriptName, string>): Promise<void> {
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    client.defineCommand(name, { lua: sources[name], numberOfKeys: SCRIPTS[name].keys });
    await Promise.all(masters.map((node) => node.script('LOAD', sources[name])));
  }
}

/** Reloads any script the server (one Redis, or one master) no longer has (a restart or SCRIPT FLUSH). */
export async function ensureScriptsLoaded(client: Redis, sources: Record<ScriptName, string>, shas: string[]): Promise<void> {
  const present = (await client.script('EXISTS', ...shas)) as number[];
  const names = Object.keys(SCRIPTS) as ScriptName[];
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (name !== undefined && present[i] !== 1) await client.script('LOAD', sources[name]);
  }
}
