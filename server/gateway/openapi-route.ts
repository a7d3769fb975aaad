import { buildOpenApiDocument } from '../openapi/document.js';
import type { HttpRouter } from './http.js';

/** `GET /openapi.json`: the contract as data, built from the same schemas as the committed file. */
export function registerOpenApiRoute(router: HttpRouter): string[] {
  const document = buildOpenApiDocument();
  router.route('get', '/openapi.json', async () => ({ body: document }));
  return ['/openapi.json'];
}
