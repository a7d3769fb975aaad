/**
 * Builds the package into dist/: ESM JavaScript (esbuild, one file per entry plus shared chunks,
 * so that every entry uses the same client class) and bundled type declarations (rollup with
 * rollup-plugin-dts). The protocol code and types the SDK uses (../../protocol) are bundled in:
 * nothing in dist/ points outside the package. Runs on `npm pack` (prepack) and `npm run build`.
 */
import { readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { rollup } from 'rollup';
import { dts } from 'rollup-plugin-dts';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');

/** Entry name → source; each is a subpath export in package.json (`index` is `.`). */
export const ENTRIES = {
  index: 'src/index.ts',
  msgpack: 'src/msgpack.ts',
  tabs: 'src/tabs.ts',
  react: 'src/react.ts',
  idb: 'src/idb.ts',
  file: 'src/file.ts',
} as const;

/** Installed with the package (dependencies, optional peers) or built into the platform. */
const EXTERNAL = ['msgpackr', 'idb-keyval', 'react', 'node:*'];

async function buildJs(): Promise<void> {
  await build({
    entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, src]) => [name, join(here, src)])),
    outdir: dist,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'neutral',
    target: ['es2022'],
    external: EXTERNAL,
    // The user's bundler minifies; readable code here makes stack traces and reviews easier.
    minify: false,
    legalComments: 'none',
    logLevel: 'warning',
  });
}

async function buildTypes(): Promise<void> {
  const bundle = await rollup({
    input: Object.fromEntries(Object.entries(ENTRIES).map(([name, src]) => [name, join(here, src)])),
    external: (id) => EXTERNAL.some((e) => (e.endsWith('*') ? id.startsWith(e.slice(0, -1)) : id === e || id.startsWith(`${e}/`))),
    plugins: [
      dts({
        tsconfig: join(here, '..', '..', 'tsconfig.browser.json'),
        compilerOptions: { noEmit: false, declaration: true, emitDeclarationOnly: true, paths: {}, types: ['node'] },
      }),
    ],
  });
  await bundle.write({ dir: dist, format: 'es', entryFileNames: '[name].d.ts', chunkFileNames: '[name]-[hash].d.ts' });
  await bundle.close();
}

/** Fails the build if anything in dist/ still points outside the package. */
async function checkSelfContained(): Promise<void> {
  for (const name of await readdir(dist)) {
    const text = await readFile(join(dist, name), 'utf8');
    const outside = text.match(/from\s+['"](\.\.\/[^'"]*)['"]|import\(\s*['"](\.\.\/[^'"]*)['"]/);
    if (outside) throw new Error(`dist/${name} imports ${outside[1] ?? outside[2]}, outside the package`);
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  await rm(dist, { recursive: true, force: true });
  await buildJs();
  await buildTypes();
  await checkSelfContained();
  const files = await readdir(dist);
  console.log(`@redpoint/client: ${files.length} files in dist/ (${files.join(', ')}) in ${(performance.now() - started).toFixed(0)} ms`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
