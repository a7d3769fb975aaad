import type { NotifyResult, NotifyScenario } from '../lib/results.js';
import type { RunningSystem } from '../systems.js';
import { NotifySession } from './notify.js';

export interface NotifyTiming {
  warmupSeconds: number;
  /** Measured seconds per system, split evenly over `rounds`. */
  seconds: number;
  rounds: number;
  /** Bound on waiting for a round's last pushes. */
  drainMs: number;
}

/**
 * One scenario across systems, side by side: every system connects its clients, warms up, then
 * the measured time is cut into rounds that visit the systems in alternating order — so a burst
 * of noise on this shared machine lands on all of them alike rather than on whichever ran then.
 */
export async function runScenario(
  systems: readonly RunningSystem[],
  scenario: NotifyScenario,
  timing: NotifyTiming,
  log: (line: string) => void,
): Promise<NotifyResult[]> {
  const sessions: NotifySession[] = [];
  try {
    for (const system of systems) {
      const session = await NotifySession.open(system, scenario, scenario.id).catch((err: unknown) => {
        throw new Error(`${system.spec.id}: ${err instanceof Error ? err.message : String(err)}`);
      });
      sessions.push(session);
      await session.drive(timing.warmupSeconds, false, timing.drainMs);
    }
    const perRound = timing.seconds / timing.rounds;
    for (let round = 0; round < timing.rounds; round++) {
      const order = round % 2 === 0 ? sessions : [...sessions].reverse();
      for (const session of order) await session.drive(perRound, true, timing.drainMs);
      log(`  ${scenario.id}: round ${round + 1}/${timing.rounds} done`);
    }
    const results: NotifyResult[] = [];
    while (sessions.length > 0) {
      const session = sessions.shift();
      if (session) results.push(await session.finish());
    }
    return results;
  } finally {
    for (const s of sessions) s.abort();
  }
}
