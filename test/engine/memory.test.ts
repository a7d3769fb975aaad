import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { engineConformance } from './conformance.js';

engineConformance('memory', async (opts) => {
  const engine = new MemoryEngine(opts);
  return { engine, cleanup: () => engine.close() };
});
