import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { breakdown, monotonicMicros, type ProfileBreakdown, readProfile } from '../lib/cpu-profile.js';
import { CpuWindow } from '../lib/proc.js';
import { type RunningSystem, SYSTEMS, startSystem } from '../systems.js';
import { IngestSession } from './ingest.js';
import { connectAll, userId } from './setup.js';

const CONNECTIONS = 32;
const CONVERSATIONS = 1000;
/** Sampling interval of the profile, µs (V8's default is 1000): a few seconds give enough samples. */
const SAMPLE_INTERVAL_US = 250;

export interface ProfiledWindow {
  /** `ingest`: POST /v1/messages alone; `ingest+push`: the same with every recipient connected. */
  name: 'ingest' | 'ingest+push';
  requests: number;
  /** Pushes the connected clients read (ingest+push only). */
  pushes: number;
  seconds: number;
  /** The server's CPU over the window from /proc (user + system, all threads). */
  cpuMicros: number;
  profile: ProfileBreakdown;
}

export interface ProfiledRun {
  engine: 'memory' | 'redis';
  windows: ProfiledWindow[];
}

/**
 * A Redpoint server under `node --cpu-prof`, saturated by autocannon (batch 1, 1:1
 * conversations): first with nobody connected, then with every recipient connected, so each
 * message also makes a push. The profile is cut into the two windows by this process's monotonic
 * clock (the profile's own clock); the server's CPU over each comes from /proc.
 */
export async function profiledRun(engine: 'memory' | 'redis', seconds: number, log: (line: string) => void): Promise<ProfiledRun> {
  const dir = await mkdtemp(join(tmpdir(), 'redpoint-prof-'));
  let system: RunningSystem | undefined;
  try {
    const running = await startSystem(SYSTEMS[engine === 'redis' ? 'redpoint-redis' : 'redpoint-memory'], {
      nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${SAMPLE_INTERVAL_US}`],
      name: `redpoint-${engine} (profiled)`,
    });
    system = running;
    const marks: Array<{ name: ProfiledWindow['name']; from: number; to: number; requests: number; pushes: number; seconds: number; cpuMicros: number }> = [];
    const measure = async (name: ProfiledWindow['name'], session: IngestSession, pushes: () => number): Promise<void> => {
      await session.run(1, 1, false);
      const cpu = new CpuWindow(running.pid).start();
      const pushesBefore = pushes();
      const from = monotonicMicros();
      await session.run(1, seconds, true);
      const to = monotonicMicros();
      const used = cpu.stop();
      marks.push({
        name,
        from,
        to,
        requests: session.result(1)?.latency.count ?? 0,
        pushes: pushes() - pushesBefore,
        seconds: used.seconds,
        cpuMicros: used.cpuMicros,
      });
      log(`  profiled ${engine}: ${name} measured`);
    };
    await measure('ingest', await IngestSession.open(running, CONVERSATIONS, CONNECTIONS, 'pa'), () => 0);

    const session = await IngestSession.open(running, CONVERSATIONS, CONNECTIONS, 'pb');
    let pushes = 0;
    const uids = Array.from({ length: CONVERSATIONS }, (_, i) => userId('pb', i));
    const clients = await connectAll(running, uids, () => () => {
      pushes += 1;
    });
    try {
      await measure('ingest+push', session, () => pushes);
    } finally {
      for (const c of clients) c.close();
    }
    // SIGTERM: the server exits through process.exit, which writes the profile.
    system = undefined;
    await running.stop();
    const profile = await readProfile(dir);
    return {
      engine,
      windows: marks.map((m) => ({
        name: m.name,
        requests: m.requests,
        pushes: m.pushes,
        seconds: m.seconds,
        cpuMicros: m.cpuMicros,
        profile: breakdown(profile, m.from, m.to),
      })),
    };
  } finally {
    await system?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
