// The dev entry point (`npm start`): Redpoint exactly as server/main.ts runs it, plus the demo page
// in dev mode (client-demo/page-routes.ts, bundled with esbuild on each load). Production images
// run server/main.ts, which never imports this directory.
import { runRedpoint } from '../server/run.js';

await runRedpoint({ routesModule: new URL('./page-routes.ts', import.meta.url).href });
