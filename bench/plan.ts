import type { BenchOptions } from './lib/args.js';
import type { NotifyScenario } from './lib/results.js';
import { SYSTEM_IDS, type SystemId } from './systems.js';

export interface IngestPlan {
  systems: SystemId[];
  batches: number[];
}

export interface NotifyRun {
  scenario: NotifyScenario;
  systems: SystemId[];
}

export interface Plan {
  notify: NotifyRun[];
  ingest: IngestPlan;
  systems: SystemId[];
}

const SECTIONS = ['notify', 'ingest'];
export const INGEST_SYSTEMS: readonly SystemId[] = ['uws-raw', 'redis-raw', 'redpoint-memory', 'redpoint-redis'];
export const INGEST_BATCHES = [1, 50] as const;

export function scenariosFor(options: BenchOptions): NotifyScenario[] {
  const out: NotifyScenario[] = [];
  for (const kind of ['1to1', 'group'] as const) {
    for (const clients of options.scales) {
      out.push({
        id: `${kind}-${clients}`,
        kind,
        clients,
        groupSize: options.groupSize,
        rate: kind === '1to1' ? options.rate : options.groupRate,
      });
    }
  }
  return out;
}

/**
 * What to run. Notify runs go scenario by scenario with every system side by side, so the
 * machine's drifting noise hits all systems of a scenario alike.
 */
export function makePlan(options: BenchOptions): Plan {
  const scenarios = scenariosFor(options);
  const known = new Set<string>([...SECTIONS, ...SYSTEM_IDS, '1to1', 'group', ...scenarios.map((s) => s.id)]);
  const unknown = options.only.filter((t) => !known.has(t));
  if (unknown.length > 0) throw new Error(`--only: unknown ${unknown.join(', ')}; choose from ${[...known].join(', ')}`);

  const sections = options.only.filter((t) => SECTIONS.includes(t));
  const systemTokens = options.only.filter((t): t is SystemId => (SYSTEM_IDS as readonly string[]).includes(t));
  const scenarioTokens = options.only.filter((t) => !SECTIONS.includes(t) && !(SYSTEM_IDS as readonly string[]).includes(t));
  const pickSystem = (id: SystemId): boolean => systemTokens.length === 0 || systemTokens.includes(id);

  const notifyOn = sections.length === 0 || sections.includes('notify');
  const ingestOn = sections.includes('ingest') || (sections.length === 0 && scenarioTokens.length === 0);
  const notify = notifyOn
    ? scenarios
        .filter((s) => scenarioTokens.length === 0 || scenarioTokens.includes(s.id) || scenarioTokens.includes(s.kind))
        .map((scenario) => ({ scenario, systems: SYSTEM_IDS.filter(pickSystem) }))
        .filter((run) => run.systems.length > 0)
    : [];
  const ingest = { systems: ingestOn ? INGEST_SYSTEMS.filter(pickSystem) : [], batches: [...INGEST_BATCHES] };
  const systems = SYSTEM_IDS.filter((id) => notify.some((r) => r.systems.includes(id)) || ingest.systems.includes(id));
  return { notify, ingest, systems };
}
