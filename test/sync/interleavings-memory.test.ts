import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { interleavingSuite } from './interleavings.js';

interleavingSuite('memory', async () => {
  const engine = new MemoryEngine({ snapshotEvery: 4, streamMaxLen: 100 });
  return { engine, cleanup: () => engine.close() };
});
