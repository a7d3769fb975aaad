import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';

/**
 * The production server never carries its demo: server/main.ts (and the worker thread it may
 * start) import nothing from client-demo/ and not esbuild, the production build compiles none of
 * it, and the image does not copy it. The dev entry (`npm start`, client-demo/dev-server.ts)
 * adds the demo page, in one process and in every worker thread.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const run = promisify(execFile);
/** The worker of each logged request for the demo stylesheet. */
const servedBy = (server: ServerProcess): unknown[] =>
  server
    .lines()
    .filter((l) => l.msg === 'request' && l.url === '/demo/app.css')
    .map((l) => l.worker);
const DEV_ENTRY = { file: process.execPath, args: ['--import', 'tsx', 'client-demo/dev-server.ts'] };

/** Every module file (relative to the repo) and every package the bundle of `entries` reaches, dynamic imports included. */
async function importGraph(entries: string[]): Promise<{ files: string[]; packages: string[] }> {
  const result = await build({
    entryPoints: entries.map((e) => resolve(ROOT, e)),
    bundle: true,
    platform: 'node',
    format: 'esm',
    packages: 'external',
    splitting: true,
    outdir: resolve(ROOT, 'dist-import-graph'),
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  const files = Object.keys(result.metafile.inputs).map((f) => relative(ROOT, resolve(ROOT, f)));
  const packages = new Set<string>();
  for (const output of Object.values(result.metafile.outputs)) for (const i of output.imports) if (i.external) packages.add(i.path);
  return { files, packages: [...packages] };
}

describe('entry points: production without the demo, dev with it', () => {
  it('server/main.ts and the worker thread reach no client-demo/ module and not esbuild', async () => {
    const { files, packages } = await importGraph(['server/main.ts', 'server/workers/worker.ts']);
    expect(files).toContain('server/app.ts');
    expect(files).toContain('server/gateway/dev-token-route.ts');
    expect(files.filter((f) => f.startsWith('client-demo/'))).toEqual([]);
    expect(packages.filter((p) => p === 'esbuild' || p.startsWith('esbuild/'))).toEqual([]);
    expect(packages).toContain('ioredis');
    // The same walk from the dev entry's routes reaches them through the lazy import(): the check can see what it looks for.
    const dev = await importGraph(['client-demo/page-routes.ts']);
    expect(dev.files).toContain('client-demo/build.ts');
    expect(dev.packages).toContain('esbuild');
  });

  it('the production build compiles nothing of client-demo/ or esbuild, and the image does not copy client-demo/', async () => {
    const { stdout } = await run('npx', ['tsc', '-p', 'tsconfig.build.json', '--listFilesOnly'], { cwd: ROOT, maxBuffer: 16 << 20 });
    const compiled = stdout.split('\n').filter(Boolean);
    expect(compiled.some((f) => f.endsWith('server/main.ts'))).toBe(true);
    expect(compiled.filter((f) => f.includes('/client-demo/') || f.includes('/node_modules/esbuild/'))).toEqual([]);
    const dockerfile = await readFile(resolve(ROOT, 'Dockerfile'), 'utf8');
    expect(dockerfile.split('\n').filter((line) => /^\s*COPY\b.*client-demo/.test(line))).toEqual([]);
  }, 60_000);

  describe('served routes', () => {
    let redis: RedisServer;
    const processes: ServerProcess[] = [];
    beforeAll(async () => {
      redis = await startRedisServer();
    });
    afterAll(async () => {
      await Promise.all(processes.map((p) => p.stop()));
      await redis?.stop();
    });
    const spawn = async (env: Record<string, string>, command?: typeof DEV_ENTRY): Promise<ServerProcess> => {
      const server = await spawnServer(env, { devMode: true, ...(command ? { command } : {}) });
      processes.push(server);
      return server;
    };
    const get = async (url: string): Promise<{ status: number; type: string | null; text: string }> => {
      const res = await fetch(url);
      return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
    };
    const devToken = async (url: string): Promise<number> =>
      (await fetch(`${url}/dev/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"uid":"alice"}' })).status;

    it('server/main.ts in dev mode: /dev/token works, no demo page (404)', async () => {
      const server = await spawn({});
      expect(await devToken(server.url)).toBe(200);
      for (const path of ['/', '/demo/app.js', '/demo/app.css']) expect((await get(`${server.url}${path}`)).status).toBe(404);
    }, 120_000);

    it('the dev entry serves the demo page and /dev/token', async () => {
      const server = await spawn({}, DEV_ENTRY);
      const page = await get(`${server.url}/`);
      expect(page.status).toBe(200);
      expect(page.type).toMatch(/^text\/html/);
      expect(page.text).toContain('/demo/app.js');
      expect((await get(`${server.url}/demo/app.js`)).status).toBe(200);
      expect(await devToken(server.url)).toBe(200);
    }, 120_000);

    it('the dev entry with WORKERS=2 on Redis: every worker serves the demo page', async () => {
      // debug: each request is logged with the worker that served it.
      const server = await spawn({ REDIS_URL: redis.url, WORKERS: '2', LOG_LEVEL: 'debug' }, DEV_ENTRY);
      // Each request on a new connection: the kernel spreads connections over the workers'
      // sockets, so a worker without the page would answer some of them 404.
      const statuses: number[] = [];
      for (let i = 0; i < 16; i++) {
        const res = await fetch(`${server.url}/demo/app.css`, { headers: { connection: 'close' } });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      expect(statuses).toEqual(Array(16).fill(200));
      // Else one worker served them all and the other's page went untested.
      await server.waitLog((l) => l.msg === 'request' && l.url === '/demo/app.css' && servedBy(server).length === 16);
      expect(new Set(servedBy(server))).toEqual(new Set([0, 1]));
    }, 120_000);
  });
});
