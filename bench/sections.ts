import type { Section } from './lib/section.js';
import { clusterSection } from './scenarios/cluster.js';
import { diffusionSection } from './scenarios/diffusion.js';
import { durableSection } from './scenarios/durable.js';
import { heavyUserSection } from './scenarios/heavy-user.js';
import { luaPartsSection } from './scenarios/lua-parts.js';
import { memorySection } from './scenarios/memory.js';
import { messageInstructionsSection } from './scenarios/message-instructions.js';
import { orderSection } from './scenarios/order.js';
import { gcSection, ingestCostSection } from './scenarios/profile.js';
import { queueIngestSection } from './scenarios/queue-ingest.js';
import { receiptsSection } from './scenarios/receipts.js';
import { reconnectSection } from './scenarios/reconnect.js';
import { redisCostSection } from './scenarios/redis-cost.js';
import { saturationSection } from './scenarios/saturation.js';
import { soakSection } from './scenarios/soak.js';
import { storeSection } from './scenarios/store.js';
import { storeInstructionsSection } from './scenarios/store-instructions.js';
import { sweepSection } from './scenarios/sweep.js';
import { workersSection } from './scenarios/workers.js';
import { engineSpikeSection } from './spike/engine-spike.js';

/** Every scenario beyond the notify and ingest tables, in the order a full run takes them. */
export const SECTIONS: readonly Section[] = [
  memorySection,
  storeSection,
  redisCostSection,
  messageInstructionsSection,
  luaPartsSection,
  diffusionSection,
  storeInstructionsSection,
  clusterSection,
  ingestCostSection,
  gcSection,
  saturationSection,
  reconnectSection,
  sweepSection,
  orderSection,
  soakSection,
  workersSection,
  queueIngestSection,
  durableSection,
  heavyUserSection,
  engineSpikeSection,
  receiptsSection,
];

/** Sections that `--only ingest` runs along with the ingest table (they explain it). */
export const SECTIONS_WITH_INGEST: readonly string[] = ['ingest-cost'];
