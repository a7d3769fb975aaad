import { buildOpenApiDocument } from '../openapi/document.js';
import type { HttpRouter } from './http.js';

/**
 * `GET /openapi.json`: the contract as data, built from the same schemas as the committed file
 * (which is the production one); a dev-mode server also lists the dev-mode endpoints it serves.
 */
export function registerOpenApiRoute(router: HttpRouter, devMode: boolean): string[] {
  const document = buildOpenApiDocument({ devMode });
  router.route('get', '/openapi.json', async () => ({ body: document }));
  return ['/openapi.json'];
}
