// The dev entry point (`npm start`): Redpoint exactly as server/main.ts runs it, plus the demo page
// in dev mode (client-demo/page-routes.ts, bundled with esbuild on each load). Production images
// run server/main.ts, which never imports this directory.
import { resolveCredentials } from '../server/auth/auth-config.js';
import { runRedpoint } from '../server/run.js';
import { DEMO_BADGE_HOOK_PATH, DEMO_BADGE_HOOK_SECRET } from './badge-receiver.js';

// With no badge hook configured, the hook tells the demo's own receiver (badge-receiver.ts), so the
// page can show the event a push service would get. Set BADGE_HOOK_URL (or BADGE_HOOK_NATS_URL)
// to send them elsewhere. Dev mode only (no credentials set; it listens on 127.0.0.1): outside it
// the page and its receiver are not served.
const devMode = resolveCredentials(process.env, []).devMode;
if (devMode && !process.env.BADGE_HOOK_URL && !process.env.BADGE_HOOK_NATS_URL) {
  process.env.BADGE_HOOK_URL = `http://127.0.0.1:${process.env.PORT || '8080'}${DEMO_BADGE_HOOK_PATH}`;
  process.env.BADGE_HOOK_SECRET = DEMO_BADGE_HOOK_SECRET;
}

await runRedpoint({ routesModule: new URL('./page-routes.ts', import.meta.url).href });
