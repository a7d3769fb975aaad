// The production entry point: node dist/server/main.js (or `node --import tsx server/main.ts`).
// It serves no demo page; `npm start` runs client-demo/dev-server.ts, which adds it.
import { runRedpoint } from './run.js';

await runRedpoint();
