import { DevTokenBody, decode } from '../../protocol/schemas.js';
import type { Authenticator } from '../auth/tokens.js';
import type { HttpRouter } from './http.js';

/**
 * Dev mode only (registered by app.ts when `config.devMode`): `POST /dev/token {uid}` mints a
 * 24 h client token with the published dev secret, so a page or a curl session can act as anyone.
 */
export function registerDevTokenRoute(router: HttpRouter, auth: Authenticator): string[] {
  router.route(
    'post',
    '/dev/token',
    async (ctx) => {
      const { uid } = decode(DevTokenBody, ctx.body);
      return { body: { uid, token: await auth.mintUserToken(uid, 24 * 3600) } };
    },
    { body: true },
  );
  return ['/dev/token'];
}
