import type { Section } from './lib/section.js';
import { memorySection } from './scenarios/memory.js';
import { storeSection } from './scenarios/store.js';
import { clusterSection } from './scenarios/cluster.js';

/** Every scenario beyond the notify and ingest tables, in the order a full run takes them. */
export const SECTIONS: readonly Section[] = [memorySection, storeSection, clusterSection];

/** Sections that `--only ingest` runs along with the ingest table (they explain it). */
export const SECTIONS_WITH_INGEST: readonly string[] = ['ingest-cost'];
