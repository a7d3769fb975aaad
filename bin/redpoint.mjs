#!/usr/bin/env node
// The `redpoint` CLI (package.json "bin"). In a checkout it runs the TypeScript source through
// tsx (a dev dependency); where only the build is present (the Docker image), dist/.
import { existsSync } from 'node:fs';

const source = new URL('../server/cli.ts', import.meta.url);
const built = new URL('../dist/server/cli.js', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import(built.href);
}
