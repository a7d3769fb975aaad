/**
 * `npm run openapi`: writes the OpenAPI document generated from the schemas to
 * `protocol/openapi.json` (committed; a test fails when it is out of date).
 * `npm run openapi -- --check` only compares, and exits 1 when the file differs.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { buildOpenApiDocument } from './document.js';

export const OPENAPI_FILE = fileURLToPath(new URL('../../protocol/openapi.json', import.meta.url));

/** The file's exact text: stable key order, two-space indent, final newline. */
export function openApiText(): string {
  return `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const text = openApiText();
  if (process.argv.includes('--check')) {
    const current = await readFile(OPENAPI_FILE, 'utf8').catch(() => '');
    if (current !== text) {
      console.error(`${OPENAPI_FILE} is out of date: run npm run openapi`);
      process.exit(1);
    }
  } else {
    await writeFile(OPENAPI_FILE, text);
    console.log(`wrote ${OPENAPI_FILE}`);
  }
}
