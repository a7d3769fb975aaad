import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import type { Reply } from './codec.js';

/** Every Lua script, by the name ioredis defines it under, and its number of KEYS. */
export const SCRIPTS = {
  userApply: { file: 'user_apply.lua', keys: 6 },
  pull: { file: 'pull.lua', keys: 4 },
  userState: { file: 'user_state.lua', keys: 3 },
  position: { file: 'position.lua', keys: 1 },
  convEnsure: { file: 'conv_ensure.lua', keys: 2 },
  convGet: { file: 'conv_get.lua', keys: 2 },
  convRecord: { file: 'conv_record.lua', keys: 2 },
  convMembers: { file: 'conv_members.lua', keys: 2 },
  convMode: { file: 'conv_mode.lua', keys: 1 },
} as const;

export type ScriptName = keyof typeof SCRIPTS;

type ScriptArg = string | number;

/** The Buffer variants ioredis adds for each `defineCommand` (binary-safe replies). */
export type ScriptCommands = {
  [K in ScriptName as `${K}Buffer`]: (...args: ScriptArg[]) => Promise<Reply>;
};

export type ScriptedRedis = Redis & ScriptCommands;

/**
 * The .lua files sit next to this module in the source tree; a `tsc` build does not copy them
 * into dist/, so from there fall back to the source tree.
 */
function luaDir(): string {
  const candidates = [new URL('./lua/', import.meta.url), new URL('../../../../server/engine/redis/lua/', import.meta.url)];
  for (const url of candidates) {
    const dir = fileURLToPath(url);
    if (existsSync(dir)) return dir;
  }
  throw new Error(`Redis Lua scripts not found (looked in ${candidates.map((u) => fileURLToPath(u)).join(', ')})`);
}

export function loadScriptSources(): Record<ScriptName, string> {
  const dir = luaDir();
  const out = {} as Record<ScriptName, string>;
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    out[name] = readFileSync(dir + SCRIPTS[name].file, 'utf8');
  }
  return out;
}

/**
 * Defines every script on the client (ioredis then calls them by sha and falls back to EVAL after
 * a NOSCRIPT, e.g. once Redis restarted) and loads them now, so a Lua error fails at startup.
 * Returns the shas, for the readiness check.
 */
export async function defineScripts(client: Redis, sources: Record<ScriptName, string>): Promise<string[]> {
  const shas: string[] = [];
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    client.defineCommand(name, { lua: sources[name], numberOfKeys: SCRIPTS[name].keys });
    shas.push(String(await client.script('LOAD', sources[name])));
  }
  return shas;
}

/** Reloads any script the server no longer has (a restart or SCRIPT FLUSH). */
export async function ensureScriptsLoaded(client: Redis, sources: Record<ScriptName, string>, shas: string[]): Promise<void> {
  const present = (await client.script('EXISTS', ...shas)) as number[];
  const names = Object.keys(SCRIPTS) as ScriptName[];
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (name !== undefined && present[i] !== 1) await client.script('LOAD', sources[name]);
  }
}
