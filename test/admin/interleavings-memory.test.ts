import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { adminInterleavingSuite } from './interleavings.js';

adminInterleavingSuite('memory', async () => {
  const engine = new MemoryEngine({ snapshotEvery: 4, streamMaxLen: 100 });
  return { engine, cleanup: () => engine.close() };
});
