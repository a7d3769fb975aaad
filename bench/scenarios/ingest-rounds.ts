import type { IngestResult } from '../lib/results.js';
import type { RunningSystem } from '../systems.js';
import { IngestSession } from './ingest.js';

export interface IngestTiming {
  warmupSeconds: number;
  /** Measured seconds per (system, batch), split evenly over `rounds`. */
  seconds: number;
  rounds: number;
  connections: number;
  conversations: number;
}

/** Every batch size on every system, measured in rounds that alternate the systems' order. */
export async function runIngestRounds(
  systems: readonly RunningSystem[],
  batches: readonly number[],
  timing: IngestTiming,
  log: (line: string) => void,
): Promise<IngestResult[]> {
  const sessions: IngestSession[] = [];
  for (const system of systems) {
    const session = await IngestSession.open(system, timing.conversations, timing.connections, 'ingest');
    for (const batch of batches) await session.run(batch, timing.warmupSeconds, false);
    sessions.push(session);
  }
  const perRound = Math.max(1, timing.seconds / timing.rounds);
  for (let round = 0; round < timing.rounds; round++) {
    const order = round % 2 === 0 ? sessions : [...sessions].reverse();
    for (const batch of batches) {
      for (const session of order) await session.run(batch, perRound, true);
    }
    log(`  ingest: round ${round + 1}/${timing.rounds} done`);
  }
  return batches.flatMap((batch) => sessions.map((s) => s.result(batch)).filter((r): r is IngestResult => r !== undefined));
}
