import { readFile } from 'node:fs/promises';
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerRoutes as registerDemoPage } from '../../client-demo/page-routes.js';
import { ERROR_CODES, type ErrorCode } from '../../protocol/errors.js';
import { ENDPOINTS } from '../../protocol/http-api.js';
import { DEV_API_KEY, DEV_JWT_SECRET } from '../../server/config.js';
import { buildOpenApiDocument } from '../../server/openapi/document.js';
import { OPENAPI_FILE, openApiText } from '../../server/openapi/write.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * The OpenAPI document: generated, committed, served, valid, and covering exactly the routes the
 * server registers and the endpoints PROTOCOL.md lists.
 */

let prod: TestServer;
let dev: TestServer;

beforeAll(async () => {
  // CORS on, so that its preflight routes exist and are shown to be the only undocumented ones.
  prod = await startTestServer({ config: { corsOrigins: ['http://127.0.0.1:1'] } });
  // The dev entry's server: the demo page's routes too (client-demo/page-routes.ts).
  dev = await startTestServer({ config: { devMode: true, apiKey: DEV_API_KEY, jwtSecret: DEV_JWT_SECRET }, routes: registerDemoPage });
});

afterAll(async () => {
  await prod?.close();
  await dev?.close();
});

/** `METHOD /path` of the routes a server registered, OPTIONS (CORS preflights) left out. */
function served(server: TestServer): string[] {
  return server.server.routes
    .filter((r) => r.method !== 'options')
    .map((r) => `${r.method === 'del' ? 'DELETE' : r.method.toUpperCase()} ${r.pattern}`)
    .sort();
}

function documented(devMode: boolean): string[] {
  return ENDPOINTS.filter((e) => devMode || !e.devModeOnly)
    .map((e) => `${e.method.toUpperCase()} ${e.path}`)
    .sort();
}

describe('the OpenAPI document', () => {
  it('the committed protocol/openapi.json is what `npm run openapi` generates now', async () => {
    const committed = await readFile(OPENAPI_FILE, 'utf8').catch(() => '(missing)');
    // On a mismatch: run `npm run openapi` and commit the file.
    expect(committed).toBe(openApiText());
  });

  it('is a valid OpenAPI 3.1 document (swagger-parser)', async () => {
    const api = await SwaggerParser.validate(structuredClone(buildOpenApiDocument()) as never);
    expect((api as { openapi: string }).openapi).toBe('3.1.0');
  });

  it('swagger-parser rejects a broken one (the check above can fail)', async () => {
    const broken = structuredClone(buildOpenApiDocument()) as { paths: Record<string, Record<string, { responses: unknown }>> };
    const sync = broken.paths['/v1/sync']?.get;
    if (!sync) throw new Error('no GET /v1/sync');
    sync.responses = { '200': { content: {} } }; // a response without its required description
    await expect(SwaggerParser.validate(broken as never)).rejects.toThrow();
  });

  it('is served at /openapi.json, identical to the generated one; dev-mode endpoints are listed only in dev mode', async () => {
    const res = await prod.request('GET', '/openapi.json', { auth: 'none' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(buildOpenApiDocument());
    const paths = (doc: unknown): string[] => Object.keys((doc as { paths: Record<string, unknown> }).paths);
    expect(paths(res.body).filter((p) => p === '/' || p.startsWith('/dev/') || p.startsWith('/demo/'))).toEqual([]);
    const devDoc = (await dev.request('GET', '/openapi.json', { auth: 'none' })).body;
    expect(devDoc).toEqual(buildOpenApiDocument({ devMode: true }));
    expect(paths(devDoc)).toEqual(expect.arrayContaining(['/dev/token', '/', '/demo/app.js']));
    await SwaggerParser.validate(structuredClone(devDoc) as never);
  });

  it('documents exactly the routes the server serves, in production and in dev mode', () => {
    expect(served(prod)).toEqual(documented(false));
    expect(served(dev)).toEqual(documented(true));
    expect(prod.server.routes.some((r) => r.method === 'options')).toBe(true);
  });

  it("documents every endpoint of PROTOCOL.md's endpoint table", async () => {
    const protocol = await readFile(new URL('../../protocol/PROTOCOL.md', import.meta.url), 'utf8');
    const rows = [...protocol.matchAll(/^\| `(GET|POST|PUT|DELETE)` \| (`[^|]+`) \|/gm)];
    expect(rows.length).toBeGreaterThan(5);
    const listed = rows.flatMap(([, method, paths]) => [...(paths ?? '').matchAll(/`([^`]+)`/g)].map((m) => `${method} ${m[1]}`));
    expect(listed.filter((endpoint) => !documented(true).includes(endpoint))).toEqual([]);
  });

  it("names every error code of PROTOCOL.md's Errors table, each under its status there", async () => {
    // The reference is the written contract, not ERROR_CODES: the document and the server both
    // derive from ERROR_CODES, so comparing the document with it would compare the code with itself.
    const table = await protocolErrorTable();
    expect(Object.keys(table).length).toBeGreaterThan(10);
    const doc = buildOpenApiDocument() as unknown as OpenApiDoc;
    expect([...doc.components.schemas.Error.properties.error.properties.code.enum].sort()).toEqual(Object.keys(table).sort());
    // Every error response, per path, method and status, names only codes of that status.
    const misfiled: string[] = [];
    let checked = 0;
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          for (const code of codesIn(resolve(doc, response))) {
            checked++;
            if (String(table[code]) !== status) misfiled.push(`${method.toUpperCase()} ${path} ${status}: ${code} (PROTOCOL.md: ${table[code]})`);
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect(misfiled).toEqual([]);
  });

  it('the server answers each code with the status PROTOCOL.md gives it', async () => {
    const table = await protocolErrorTable();
    for (const [code, status] of Object.entries(table)) expect([code, ERROR_CODES[code as ErrorCode]?.status]).toEqual([code, status]);
  });
});

type OpenApiDoc = {
  paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  components: { responses: Record<string, unknown>; schemas: { Error: { properties: { error: { properties: { code: { enum: string[] } } } } } } };
};

/** `code -> HTTP status` as PROTOCOL.md's *Errors* table writes it. */
async function protocolErrorTable(): Promise<Record<string, number>> {
  const protocol = await readFile(new URL('../../protocol/PROTOCOL.md', import.meta.url), 'utf8');
  const section = protocol.slice(protocol.indexOf('\n## Errors'), protocol.indexOf('\n## HTTP endpoints'));
  return Object.fromEntries([...section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)].map(([, code, status]) => [code, Number(status)]));
}

function resolve(doc: OpenApiDoc, response: unknown): unknown {
  const ref = (response as { $ref?: unknown }).$ref;
  if (typeof ref !== 'string') return response;
  const name = ref.replace('#/components/responses/', '');
  const target = doc.components.responses[name];
  if (target === undefined) throw new Error(`dangling ${ref}`);
  return target;
}

/** Every error code an error schema in this response names (`error.properties.code.enum`). */
function codesIn(node: unknown): string[] {
  if (node === null || typeof node !== 'object') return [];
  const here = (node as { properties?: { error?: { properties?: { code?: { enum?: unknown } } } } }).properties?.error?.properties?.code?.enum;
  const own = Array.isArray(here) ? here.map(String) : [];
  return [...new Set([...own, ...Object.values(node).flatMap(codesIn)])];
}
