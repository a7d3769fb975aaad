import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PROJECT_ROOT } from './child-server.js';

/** The parts of a V8 `.cpuprofile` (node --cpu-prof) the bench reads. */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * Where a server's time went, by category. V8 times its samples on the monotonic clock in µs, the
 * same clock as `process.hrtime` of any process on the host, so a window can be cut out of a
 * profile by the load generator's own timestamps (`monotonicMicros`).
 */
export interface ProfileBreakdown {
  /** Sampled µs in the window, by category ('idle' is the event loop waiting: Redis replies, the next request). */
  micros: Map<string, number>;
  totalMicros: number;
  /** The hottest functions of the window by self time: `name (file)` → µs. */
  top: Array<{ frame: string; category: string; micros: number }>;
}

export const monotonicMicros = (): number => Number(process.hrtime.bigint() / 1000n);

export const CATEGORIES = [
  'HTTP (router, uWS calls, reply JSON)',
  'native (uWS C++, V8 builtins)',
  'JSON (body decode)',
  'validation (TypeBox)',
  'auth',
  'ingest (group commit)',
  'engine (script args, codecs)',
  'ioredis',
  'push fan-out (WebSocket)',
  'metrics (prom-client)',
  'logging',
  'Node internals',
  'GC',
  'idle (waiting: Redis, network)',
  'other',
] as const;
export type Category = (typeof CATEGORIES)[number];

const RULES: Array<[RegExp, Category]> = [
  [/node_modules\/@sinclair\/typebox|\/protocol\/schemas\.ts|\/gateway\/ws-frames\.ts/, 'validation (TypeBox)'],
  [/node_modules\/(ioredis|redis-parser|redis-errors|standard-as-callback|cluster-key-slot|denque|lodash)/, 'ioredis'],
  [/node_modules\/uWebSockets\.js|\/gateway\/(http|uws|api-routes|cors|ops-routes)\.ts/, 'HTTP (router, uWS calls, reply JSON)'],
  [/node_modules\/(jose)|\/server\/auth\//, 'auth'],
  [/\/server\/sync\//, 'ingest (group commit)'],
  [/\/server\/engine\//, 'engine (script args, codecs)'],
  [/\/gateway\/(fanout|ws-gateway|ws-session|rolling-sweep|rate-limiter)\.ts|node_modules\/msgpackr/, 'push fan-out (WebSocket)'],
  [/node_modules\/(prom-client|tdigest|bintrees)|\/server\/metrics\//, 'metrics (prom-client)'],
  [/node_modules\/(pino|sonic-boom|thread-stream|fast-redact|quick-format)/, 'logging'],
  [/\/protocol\/codec\.ts/, 'JSON (body decode)'],
];

/** Category of a frame by its own file, or undefined for frames that say nothing (builtins, Node internals). */
function categoryOfUrl(url: string): Category | undefined {
  if (url === '' || url.startsWith('node:')) return undefined;
  for (const [pattern, category] of RULES) if (pattern.test(url)) return category;
  return 'other';
}

/**
 * Self time of every sample in [fromMicros, toMicros], by category. A frame without a telling
 * file (a builtin such as JSON.parse, Node's own streams and timers) is charged to the nearest
 * caller that has one: a socket write ioredis asked for is ioredis' time, JSON.parse called by
 * the body decoder is JSON. What nothing claims is "Node internals".
 */
export function breakdown(profile: CpuProfile, fromMicros: number, toMicros: number): ProfileBreakdown {
  const parent = new Map<number, number>();
  const byId = new Map<number, ProfileNode>();
  for (const n of profile.nodes) {
    byId.set(n.id, n);
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const categoryCache = new Map<number, Category>();
  const categorize = (id: number): Category => {
    const cached = categoryCache.get(id);
    if (cached) return cached;
    const frame = byId.get(id)?.callFrame;
    let category: Category;
    const name = frame?.functionName ?? '';
    if (name === '(garbage collector)') category = 'GC';
    else if (name === '(idle)') category = 'idle (waiting: Redis, network)';
    else if (name === '(program)') category = 'native (uWS C++, V8 builtins)';
    else {
      let cursor: number | undefined = id;
      let found: Category | undefined;
      while (cursor !== undefined && !found) {
        const f = byId.get(cursor)?.callFrame;
        found = f ? categoryOfUrl(f.url) : undefined;
        cursor = parent.get(cursor);
      }
      category = found ?? 'Node internals';
    }
    categoryCache.set(id, category);
    return category;
  };
  const micros = new Map<string, number>();
  const selfByNode = new Map<number, number>();
  let t = profile.startTime;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    // A sample stands for the interval up to the next one.
    const dt = profile.timeDeltas[i + 1] ?? 0;
    if (t < fromMicros || t > toMicros) continue;
    const id = profile.samples[i] as number;
    const category = categorize(id);
    micros.set(category, (micros.get(category) ?? 0) + dt);
    selfByNode.set(id, (selfByNode.get(id) ?? 0) + dt);
    total += dt;
  }
  const byFrame = new Map<string, { category: string; micros: number }>();
  for (const [id, us] of selfByNode) {
    const f = byId.get(id)?.callFrame;
    if (!f) continue;
    const file = shortUrl(f.url);
    // No line numbers: tsx compiles the sources and the profile does not map them back.
    const key = `${f.functionName || '(anonymous)'} (${file || 'builtin'})`;
    const entry = byFrame.get(key) ?? { category: categorize(id), micros: 0 };
    entry.micros += us;
    byFrame.set(key, entry);
  }
  const top = [...byFrame]
    .map(([frame, e]) => ({ frame, ...e }))
    .sort((a, b) => b.micros - a.micros)
    .slice(0, 15);
  return { micros, totalMicros: total, top };
}

function shortUrl(url: string): string {
  return url
    .replace(/^file:\/\//, '')
    .replace(/^.*?\/node_modules\//, 'node_modules/')
    .replace(`${PROJECT_ROOT}/`, '');
}

/**
 * Reads the main thread's `.cpuprofile` a process wrote into `dir` (node --cpu-prof
 * --cpu-prof-dir). Every thread writes its own, `CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile`:
 * tsx's module loader runs on a thread of its own; the main thread is 0.
 */
export async function readProfile(dir: string): Promise<CpuProfile> {
  const files = (await readdir(dir)).filter((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f));
  if (files.length !== 1) throw new Error(`expected one main-thread .cpuprofile in ${dir}, found ${files.length}`);
  return JSON.parse(await readFile(join(dir, files[0] as string), 'utf8')) as CpuProfile;
}
