import type { Logger } from 'pino';
import { RedpointError } from '../../protocol/errors.js';
import { decode, DevTokenBody } from '../../protocol/schemas.js';
import type { DemoBundle } from '../../client-demo/build.js';
import type { Authenticator } from '../auth/tokens.js';
import type { HttpRouter, Reply } from './http.js';

interface DemoDeps {
  auth: Authenticator;
  /** The dev API key, handed to the page so it can post test messages. */
  apiKey: string;
  log: Logger;
}

const PAGE_PATHS = ['/', '/demo/app.js', '/demo/app.css'];

/**
 * Dev mode only (registered by app.ts when `config.devMode`): the demo page at `/`, its bundle,
 * and `POST /dev/token {uid}` minting a client token with the published dev secret. The bundle is
 * built with esbuild (a dev dependency, imported lazily) on each load of `/`, so a refresh shows
 * edits to client-demo/.
 */
export function registerDemoRoutes(router: HttpRouter, { auth, apiKey, log }: DemoDeps): string[] {
  let bundle: Promise<DemoBundle> | undefined;
  const rebuild = (): Promise<DemoBundle> => {
    bundle = import('../../client-demo/build.js').then((m) => m.buildDemo({ apiKey }));
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
  router.route(
    'post',
    '/dev/token',
    async (ctx) => {
      const { uid } = decode(DevTokenBody, ctx.body);
      return { body: { uid, token: await auth.mintUserToken(uid, 24 * 3600) } };
    },
    { body: true },
  );
  return [...PAGE_PATHS, '/dev/token'];
}
