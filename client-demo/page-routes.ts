import { RedpointError } from '../protocol/errors.js';
import type { HttpRouter, Reply } from '../server/gateway/http.js';
import type { RouteHookDeps } from '../server/gateway/route-hook.js';
import { DEMO_BADGE_HOOK_SECRET, registerBadgeReceiver } from './badge-receiver.js';
import type { DemoBundle } from './build.js';
import { registerDemoActivity } from './demo-activity.js';

const PAGE_PATHS = ['/', '/demo/app.js', '/demo/app.css'];

/**
 * The demo page at `/` and its bundle, in dev mode only: a RouteHook that the dev entry
 * (client-demo/dev-server.ts, `npm start`) adds to the server. The bundle is built with esbuild
 * (a dev dependency, imported lazily) on each load of `/`, so a refresh shows edits to
 * client-demo/. `POST /dev/token`, which the page signs in with, is the server's own (dev mode).
 * Also the demo's shared activity record and the badge hook's receiver (badge-receiver.ts).
 */
export function registerRoutes(router: HttpRouter, { apiKey, devMode, log }: RouteHookDeps): string[] {
  if (!devMode) return [];
  let bundle: Promise<DemoBundle> | undefined;
  const rebuild = (): Promise<DemoBundle> => {
    bundle = import('./build.js').then((m) => m.buildDemo({ apiKey }));
    bundle.catch((err: unknown) => log.error({ err }, 'demo page build failed'));
    return bundle;
  };

  const asset = async (path: string): Promise<Reply> => {
    let files: DemoBundle;
    try {
      files = await (path === '/' || !bundle ? rebuild() : bundle);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return {
        status: 500,
        body: null,
        text: { contentType: 'text/plain; charset=utf-8', content: `demo page build failed (is esbuild installed? npm ci):\n${message}` },
      };
    }
    const file = files.get(path);
    if (!file) throw new RedpointError('not_found', 'no such demo asset');
    return { body: null, text: file };
  };

  for (const path of PAGE_PATHS) router.route('get', path, () => asset(path), { name: 'demo' });
  // The badge hook's receiver checks with the secret the hook signs with (dev-server.ts sets both when none is configured).
  const badgeSecret = process.env.BADGE_HOOK_SECRET ?? DEMO_BADGE_HOOK_SECRET;
  return [...PAGE_PATHS, ...registerDemoActivity(router), ...registerBadgeReceiver(router, badgeSecret)];
}
