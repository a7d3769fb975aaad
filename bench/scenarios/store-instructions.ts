import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { snapshotInterval } from '../../server/engine/rules.js';
import { findOnPath, startRedisServer } from '../../test/helpers/redis-server.js';
import { statsConnection } from '../lib/redis-info.js';
import { emptyReport, fmt, type Section } from '../lib/section.js';
import { createMesh, defaultEngineOptions, directMesh, openInProcessStore } from './engine-setup.js';
import { type ApplyChunk, CHUNK, OpSource, rawApply, redpointApply } from './store-load.js';

const run = promisify(execFile);

/** Under valgrind every Redis command is ~50× slower: the store's timeout must not fire. */
const STORE_TIMEOUT_UNDER_VALGRIND_MS = 600_000;
const READY_TIMEOUT_MS = 120_000;

/**
 * What the instruction counts are split into: inclusive counts of functions every redis-server
 * build exports (the Debian binary is stripped of all other symbols).
 * - evalGenericCommand / fcallCommand: the whole script call (EVALSHA, or FCALL of a Redis
 *   function), Lua and commands;
 * - scriptCall: the data commands a script runs (HSET, RPUSH, ...), dispatch included;
 * - parseReply: turning those commands' replies into Lua values.
 */
const FUNCTIONS = { scripts: ['evalGenericCommand', 'fcallCommand'], commands: 'scriptCall', replies: 'parseReply' } as const;

export interface Counts {
  total: number;
  script: number;
  commands: number;
  replies: number;
}

/**
 * The store workload of scenario `store`, counted in instructions: redis-server runs under
 * callgrind (instrumented only while each system's ops run), so the figure does not depend on
 * what else the machine does. Redis CPU per op from INFO is the real cost; this is its
 * noise-free ratio, and where inside Redis the instructions go.
 */
export const storeInstructionsSection: Section = {
  id: 'store-instructions',
  title: 'Store cost per user op in Redis instructions (callgrind) — applyUserOps vs raw',
  inDefaultPlan: true,
  async run() {
    const report = emptyReport(this.id, this.title);
    const tools = ['valgrind', 'callgrind_control', 'callgrind_annotate'].map((t) => [t, findOnPath(t)] as const);
    const missing = tools.filter(([, path]) => !path).map(([t]) => t);
    if (missing.length > 0) {
      report.verdicts.push({
        what: 'Redis instructions per user op vs raw',
        value: `not measured: ${missing.join(', ')} not on PATH (apt-get install -y valgrind)`,
        target: 'a ratio',
        met: undefined,
      });
      return report;
    }
    const users = 500;
    // Every op of a chunk is one version of its user, and every user is in one chunk per cycle:
    // one snapshot interval of chunks counts each user's snapshot exactly once (a window of
    // fewer holds it once or not at all, and the average swings with where it falls).
    const chunks = snapshotInterval(defaultEngineOptions().snapshotEvery, defaultEngineOptions().streamMaxLen, 4);
    const binary = process.env.BENCH_REDIS_SERVER;
    // BENCH_CALLGRIND_DIR keeps the dumps there (for callgrind_annotate); else a temp dir, removed.
    const keep = process.env.BENCH_CALLGRIND_DIR;
    const dumps = keep ?? (await mkdtemp(join(tmpdir(), 'redpoint-callgrind-')));
    const redis = await startRedisServer({
      ...(binary ? { binary } : {}),
      runUnder: ['valgrind', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${dumps}/callgrind.out.%p`],
      startTimeoutMs: READY_TIMEOUT_MS,
    });
    const raw = statsConnection(redis.url);
    const store = await openInProcessStore({ url: redis.url }, STORE_TIMEOUT_UNDER_VALGRIND_MS);
    try {
      const pid = redis.pid();
      if (pid === undefined) throw new Error('store-instructions: redis-server is not running');
      const mesh = directMesh('i', users, 4);
      await createMesh(store.sync, mesh);
      const systems: Array<{ name: string; apply: ApplyChunk; source: OpSource }> = [
        { name: 'redpoint applyUserOps', apply: redpointApply(store.engine), source: new OpSource(mesh) },
        { name: 'raw ioredis EVALSHA', apply: await rawApply(raw), source: new OpSource(mesh) },
      ];
      // Both systems' users get a few versions first, so neither counts a first write.
      for (const s of systems) for (let i = 0; i < 2; i++) await s.apply(s.source.next());
      const control = (...args: string[]) => run('callgrind_control', [...args, String(pid)]);
      const counted: Array<{ name: string; ops: number; counts: Counts }> = [];
      for (const s of systems) {
        const batches = Array.from({ length: chunks }, () => s.source.next());
        await control('--zero');
        await control('--instr=on');
        for (const batch of batches) await s.apply(batch);
        await control('--instr=off');
        await control('--dump');
        counted.push({ name: s.name, ops: chunks * CHUNK, counts: await readDump(dumps, pid, counted.length + 1) });
      }
      const [rp, base] = counted.map((c) => perOp(c.counts, c.ops));
      if (!rp || !base) throw new Error('store-instructions: no result');
      report.method.push(
        `Scenario \`store\`'s workload (${users} users in four 1:1 conversations each; applyUserOps of ${CHUNK} users' message ops per call, as ingest calls it, against one EVALSHA of \`bench/baselines/store-raw.lua\` per op), ${(chunks * CHUNK).toLocaleString('en-US')} ops per system, one call at a time, with redis-server running under \`valgrind --tool=callgrind\`, instrumented only while each system's ops run. Instructions (Ir) do not depend on the machine's load: the ratio is repeatable where CPU time is not.`,
        '`in scripts`: inside EVALSHA or FCALL (evalGenericCommand, fcallCommand); `data commands`: the commands the scripts run, their dispatch included (scriptCall); `replies → Lua`: turning those replies into Lua values (parseReply); `Lua`: the rest of the script (the interpreter, strings, tables, its collector, arguments to redis.call); `outside scripts`: reading and parsing the requests, writing the replies. Set `BENCH_REDIS_SERVER` to a redis-server built with symbols to profile further, and `BENCH_CALLGRIND_DIR` to a directory to keep the dumps in (`callgrind_annotate` on them).',
      );
      const row = (name: string, p: ReturnType<typeof perOp>) => [
        name,
        fmt.int(p.total),
        fmt.ratio(p.total / base.total),
        fmt.int(p.script),
        fmt.int(p.commands),
        fmt.int(p.replies),
        fmt.int(p.lua),
        fmt.int(p.outside),
      ];
      report.tables.push({
        caption: 'Redis instructions per user op',
        table: {
          header: ['system', 'instructions/op', 'vs raw', 'in scripts', 'data commands', 'replies → Lua', 'Lua', 'outside scripts'],
          rows: [row('redpoint applyUserOps', rp), row('raw ioredis EVALSHA', base)],
        },
      });
      report.notes.push(
        `Redpoint's Lua costs ${fmt.ratio(rp.lua / Math.max(1, rp.commands))} its data commands; raw's ${fmt.ratio(base.lua / Math.max(1, base.commands))}. Redpoint reads before it writes (the meta hash's ten fields, the record), decides (max-merge, totals, snapshot interval, trim) and formats the record, entry and notification texts. A symbol build's profile puts most of the Lua column in the interpreter's general costs (bytecode, tables, allocation, number conversions, each redis.call's own handling) rather than in the decisions: deciding in Node and only writing in Lua was measured at more instructions, not fewer (README, "Why the Redis path is where it is").`,
      );
      report.data = { users, ops: chunks * CHUNK, systems: counted };
      return report;
    } finally {
      raw.disconnect();
      await store.close();
      await redis.stop();
      if (!keep) await rm(dumps, { recursive: true, force: true });
    }
  },
};

function perOp(c: Counts, ops: number): { total: number; script: number; commands: number; replies: number; lua: number; outside: number } {
  return {
    total: c.total / ops,
    script: c.script / ops,
    commands: c.commands / ops,
    replies: c.replies / ops,
    lua: (c.script - c.commands - c.replies) / ops,
    outside: (c.total - c.script) / ops,
  };
}

/** The path of the n-th dump callgrind_control --dump wrote for redis-server `pid` into `dir`. */
export function dumpPath(dir: string, pid: number, n: number): string {
  return join(dir, `callgrind.out.${pid}.${n}`);
}

/** The `n`-th dump (callgrind_control --dump) of process `pid`, summed by callgrind_annotate. */
export async function readDump(dir: string, pid: number, n: number): Promise<Counts> {
  const path = dumpPath(dir, pid, n);
  const files = await readdir(dir);
  if (!files.includes(basename(path))) throw new Error(`store-instructions: no callgrind dump ${path}`);
  const { stdout } = await run('callgrind_annotate', ['--inclusive=yes', '--threshold=100', path], { maxBuffer: 64 * 1024 * 1024 });
  const total = countOf(stdout, /^\s*([\d,]+) \([^)]*\)\s+PROGRAM TOTALS/m);
  const fn = (name: string) => countOf(stdout, new RegExp(`^\\s*([\\d,]+) \\([^)]*\\)\\s+\\S*:${name} \\[`, 'm'));
  return { total, script: FUNCTIONS.scripts.reduce((n, name) => n + fn(name), 0), commands: fn(FUNCTIONS.commands), replies: fn(FUNCTIONS.replies) };
}

function countOf(text: string, pattern: RegExp): number {
  const m = pattern.exec(text);
  return m?.[1] ? Number(m[1].replaceAll(',', '')) : 0;
}
