/**
 * Bundles the demo page with esbuild. `npm run build:demo` writes dist/demo/; the server in dev
 * mode imports `buildDemo` and serves the result from memory (rebuilt on each page load, ~30 ms).
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export interface DemoAsset {
  contentType: string;
  content: string;
}

/** URL path → asset. */
export type DemoBundle = Map<string, DemoAsset>;

/** The repository root, from here or from the compiled copy under dist/. */
function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('client-demo/build: package.json not found above this file');
    dir = up;
  }
  return dir;
}

/** `apiKey` fills in index.html's meta tag (the dev server passes its key); without one the placeholder stays. */
export async function buildDemo(options: { minify?: boolean; apiKey?: string } = {}): Promise<DemoBundle> {
  const root = projectRoot();
  const app = join(root, 'client-demo', 'app');
  const result = await build({
    entryPoints: [
      { in: join(app, 'main.ts'), out: 'app' },
      { in: join(app, 'styles.css'), out: 'app' },
    ],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    minify: options.minify ?? true,
    sourcemap: false,
    write: false,
    outdir: join(root, 'dist', 'demo'),
    logLevel: 'silent',
    legalComments: 'none',
  });
  const bundle: DemoBundle = new Map();
  for (const file of result.outputFiles) {
    const name = relative(join(root, 'dist', 'demo'), file.path);
    bundle.set(`/demo/${name}`, { contentType: name.endsWith('.css') ? 'text/css; charset=utf-8' : 'text/javascript; charset=utf-8', content: file.text });
  }
  const index = await readFile(join(app, 'index.html'), 'utf8');
  bundle.set('/', { contentType: 'text/html; charset=utf-8', content: options.apiKey === undefined ? index : renderIndex(index, options.apiKey) });
  return bundle;
}

function renderIndex(template: string, apiKey: string): string {
  const escaped = apiKey.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  return template.replace('%REDPOINT_API_KEY%', escaped);
}

async function main(): Promise<void> {
  const started = performance.now();
  const bundle = await buildDemo();
  const out = join(projectRoot(), 'dist', 'demo');
  await mkdir(out, { recursive: true });
  for (const [path, asset] of bundle) {
    const name = path === '/' ? 'index.html' : path.replace('/demo/', '');
    await writeFile(join(out, name), asset.content);
    console.log(`${join('dist/demo', name).padEnd(24)} ${(Buffer.byteLength(asset.content) / 1024).toFixed(1).padStart(7)} KiB`);
  }
  console.log(`built in ${(performance.now() - started).toFixed(0)} ms`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
