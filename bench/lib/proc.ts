import { execFile, execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';

/**
 * CPU time and memory of a server under test, read from /proc (Linux): a child's own figures,
 * not the load generator's. A server that runs workers as child processes is counted whole: the
 * figures sum the process and all its descendants (threads are in a process's own figures).
 */

const run = promisify(execFile);

/** Clock ticks per second of /proc/<pid>/stat times (100 on every common Linux). */
const TICKS_PER_SECOND = (() => {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { timeout: 2000 }).toString().trim());
    return Number.isFinite(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
})();

/** Fields after the `(comm)` of /proc/<pid>/stat (comm may hold spaces and parentheses). */
function statFields(pid: number): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined; // exited
  }
}

/** `pid` and every live descendant of it. */
export function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const ppid = Number(statFields(Number(name))?.[1]);
    if (!Number.isFinite(ppid)) continue;
    const list = children.get(ppid);
    if (list) list.push(Number(name));
    else children.set(ppid, [Number(name)]);
  }
  const out: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    const p = stack.pop() as number;
    out.push(p);
    stack.push(...(children.get(p) ?? []));
  }
  return out;
}

/**
 * User + system CPU of the process tree, in microseconds (10 ms resolution), counting the
 * descendants that have exited too: a process that exits takes its time out of the live tree,
 * and its parent's cutime and cstime get it when it is reaped (a PostgreSQL backend closed
 * between two readings had made the difference negative).
 */
export function cpuMicros(pid: number): number {
  let ticks = 0;
  for (const p of processTree(pid)) {
    const f = statFields(p);
    // utime, stime, cutime and cstime are fields 14 to 17 of stat; index 0 here is field 3 (state).
    if (f) ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  }
  return (ticks * 1e6) / TICKS_PER_SECOND;
}

/** Resident memory of the process tree, bytes. */
export function rssBytes(pids: readonly number[]): number {
  let kb = 0;
  for (const p of pids) {
    try {
      const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      kb += Number(m?.[1] ?? 0);
    } catch {
      // exited
    }
  }
  return kb * 1024;
}

/** CPU spent by a process tree over a window: `start()`, then `stop()` gives µs and seconds. */
export class CpuWindow {
  private startCpu = 0;
  private startAt = 0;

  constructor(private readonly pid: number) {}

  start(): this {
    this.startCpu = cpuMicros(this.pid);
    this.startAt = performance.now();
    return this;
  }

  stop(): { cpuMicros: number; seconds: number; cores: number } {
    const cpu = cpuMicros(this.pid) - this.startCpu;
    const seconds = (performance.now() - this.startAt) / 1000;
    return { cpuMicros: cpu, seconds, cores: cpu / 1e6 / Math.max(1e-3, seconds) };
  }
}

/** Samples the resident memory of a process tree every `everyMs` and keeps the peak. */
export class RssPeak {
  private peak = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly pids: number[];

  constructor(pid: number, everyMs = 50) {
    this.pids = processTree(pid);
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }

  /** Stops sampling; the peak in bytes. */
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.peak;
  }

  private sample(): void {
    this.peak = Math.max(this.peak, rssBytes(this.pids));
  }
}

/**
 * Raises the open-file limit of a running process (ours or a child) to `wanted`, as far as it
 * may go: root may raise the hard limit (prlimit), anyone else only up to it. Returns the soft
 * limit it ends with, so a scenario can say how many sockets it can hold.
 */
export async function raiseFileLimit(pid: number, wanted: number): Promise<number> {
  try {
    await run('prlimit', ['--pid', String(pid), `--nofile=${wanted}:${wanted}`], { timeout: 5000 });
  } catch {
    try {
      const hard = await currentFileLimit(pid, 'hard');
      await run('prlimit', ['--pid', String(pid), `--nofile=${Math.min(wanted, hard)}:${hard}`], { timeout: 5000 });
    } catch {
      // No prlimit: keep what we have.
    }
  }
  return currentFileLimit(pid, 'soft');
}

export async function currentFileLimit(pid: number, which: 'soft' | 'hard'): Promise<number> {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  const v = m?.[which === 'soft' ? 1 : 2];
  return v === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(v ?? 1024);
}
