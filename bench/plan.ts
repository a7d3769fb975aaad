import type { BenchOptions } from './lib/args.js';
import type { NotifyScenario } from './lib/results.js';
import type { Section } from './lib/section.js';
import { SECTIONS, SECTIONS_WITH_INGEST } from './sections.js';
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
  /** Systems the notify and ingest tables need started for the whole run. */
  systems: SystemId[];
  /** The scenarios after notify and ingest (each starts what it needs). */
  sections: Section[];
}

/** The notify-latency and ingest tables, run over the long-lived systems. */
const TABLES = ['notify', 'ingest'];
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
  const sectionIds = SECTIONS.map((s) => s.id);
  const known = new Set<string>([...TABLES, ...sectionIds, ...SYSTEM_IDS, '1to1', 'group', ...scenarios.map((s) => s.id)]);
  const unknown = options.only.filter((t) => !known.has(t));
  if (unknown.length > 0) throw new Error(`--only: unknown ${unknown.join(', ')}; choose from ${[...known].join(', ')}`);

  const tables = options.only.filter((t) => TABLES.includes(t));
  const named = options.only.filter((t) => sectionIds.includes(t));
  const systemTokens = options.only.filter((t): t is SystemId => (SYSTEM_IDS as readonly string[]).includes(t));
  const scenarioTokens = options.only.filter((t) => !TABLES.includes(t) && !sectionIds.includes(t) && !(SYSTEM_IDS as readonly string[]).includes(t));
  const pickSystem = (id: SystemId): boolean => systemTokens.length === 0 || systemTokens.includes(id);

  // Naming only other scenarios turns the tables off; naming only systems or notify scenarios
  // narrows the tables and runs no other scenario.
  const tablesFiltered = tables.length > 0 || systemTokens.length > 0 || scenarioTokens.length > 0;
  const notifyOn = tables.includes('notify') || (tables.length === 0 && named.length === 0);
  const ingestOn = tables.includes('ingest') || (tables.length === 0 && named.length === 0 && scenarioTokens.length === 0);
  const notify = notifyOn
    ? scenarios
        .filter((s) => scenarioTokens.length === 0 || scenarioTokens.includes(s.id) || scenarioTokens.includes(s.kind))
        .map((scenario) => ({ scenario, systems: SYSTEM_IDS.filter(pickSystem) }))
        .filter((run) => run.systems.length > 0)
    : [];
  const ingest = { systems: ingestOn ? INGEST_SYSTEMS.filter(pickSystem) : [], batches: [...INGEST_BATCHES] };
  const systems = SYSTEM_IDS.filter((id) => notify.some((r) => r.systems.includes(id)) || ingest.systems.includes(id));
  const sections = SECTIONS.filter((s) =>
    named.length === 0 && !tablesFiltered ? s.inDefaultPlan : named.includes(s.id) || (tables.includes('ingest') && SECTIONS_WITH_INGEST.includes(s.id)),
  );
  return { notify, ingest, systems, sections };
}
