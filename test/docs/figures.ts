import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/**
 * Figures the docs quote, from one generated source: `docs/figures/sdk-bundle.json`, which
 * `test/package/sdk-package.test.ts` measures (and writes with REDPOINT_UPDATE_FIGURES=1). Each doc
 * quotes them between `<!-- figures:NAME -->` and `<!-- /figures -->`, rendered here; a test
 * (figures.test.ts) fails when a doc's text is not what this renders.
 */

const ROOT = new URL('../../', import.meta.url);
export const FIGURES_FILE = fileURLToPath(new URL('docs/figures/sdk-bundle.json', ROOT));

/** The consumer project's bundle entries (test/package/consumer/*.ts). */
export const BUNDLES = ['bundle-json', 'bundle-msgpack', 'bundle-tabs'] as const;
export type Bundle = (typeof BUNDLES)[number];
/** Bytes of the minified bundle, and of it gzipped at level 9. */
export type BundleSizes = Record<Bundle, { min: number; gzip: number }>;

const kib = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KiB`;

const LABELS: Record<Bundle, { table: string; inline: string }> = {
  'bundle-json': { table: 'JSON frames only (`@redpoint/client`)', inline: 'with JSON frames only' },
  'bundle-msgpack': { table: 'with MessagePack (`+ @redpoint/client/msgpack`, msgpackr inside)', inline: 'with MessagePack (msgpackr)' },
  'bundle-tabs': { table: 'JSON frames, tabs sharing a socket (`+ @redpoint/client/tabs`)', inline: 'with JSON and tab sharing' },
};

interface Block {
  file: string;
  name: string;
  render(sizes: BundleSizes): string;
}

const BLOCKS: readonly Block[] = [
  {
    file: 'client-demo/README.md',
    name: 'sdk-bundle-table',
    render: (sizes) =>
      ['| bundle | min | min+gzip |', '|---|---:|---:|', ...BUNDLES.map((b) => `| ${LABELS[b].table} | ${kib(sizes[b].min)} | ${kib(sizes[b].gzip)} |`)].join(
        '\n',
      ),
  },
  {
    file: 'docs/using-from-an-app.md',
    name: 'sdk-bundle-inline',
    render: (sizes) => {
      const parts = BUNDLES.map((b) => `${kib(sizes[b].gzip)} ${LABELS[b].inline}`);
      return `${parts.slice(0, -1).join(', ')} and ${parts.at(-1)}`;
    },
  },
];

export async function readFigures(): Promise<BundleSizes> {
  return JSON.parse(await readFile(FIGURES_FILE, 'utf8')) as BundleSizes;
}

function blockPattern(name: string): RegExp {
  return new RegExp(`(<!-- figures:${name} -->\\n?)([\\s\\S]*?)(\\n?<!-- /figures -->)`);
}

/** Each doc's text with its blocks rendered from `sizes`; a doc without its block is an error. */
async function rendered(sizes: BundleSizes): Promise<Map<string, { now: string; want: string }>> {
  const out = new Map<string, { now: string; want: string }>();
  for (const block of BLOCKS) {
    const path = fileURLToPath(new URL(block.file, ROOT));
    const entry = out.get(path) ?? { now: await readFile(path, 'utf8'), want: '' };
    const base = entry.want || entry.now;
    const pattern = blockPattern(block.name);
    if (!pattern.test(base)) throw new Error(`${block.file} has no <!-- figures:${block.name} --> block`);
    entry.want = base.replace(pattern, (_all, open: string, _old: string, close: string) => `${open}${block.render(sizes)}${close}`);
    out.set(path, entry);
  }
  return out;
}

/** The docs whose quoted figures are not the recorded ones. */
export async function staleDocs(): Promise<string[]> {
  const docs = await rendered(await readFigures());
  return [...docs].filter(([, { now, want }]) => now !== want).map(([path]) => path);
}

/** Records `sizes` as the source, and writes them into every doc that quotes them. */
export async function writeFigures(sizes: BundleSizes): Promise<void> {
  await writeFile(FIGURES_FILE, `${JSON.stringify(sizes, null, 2)}\n`);
  for (const [path, { now, want }] of await rendered(sizes)) if (now !== want) await writeFile(path, want);
}
