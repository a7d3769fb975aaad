import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../../server/openapi/document.js';

/**
 * Redocly's recommended ruleset over both documents the server can serve (production's, which is
 * the committed protocol/openapi.json, and dev mode's): any error or warning fails. Run through
 * Redocly's own CLI (`redocly lint`), as an adopter's API tooling would, in an empty directory so
 * no redocly.yaml changes the rules.
 */

const run = promisify(execFile);
const CLI = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');

interface Problem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: Array<{ pointer: string }>;
}

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'redpoint-openapi-lint-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function lint(file: string): Promise<{ totals: { errors: number; warnings: number }; problems: Problem[] }> {
  const env = { PATH: process.env.PATH ?? '', HOME: dir, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
  const args = [CLI, 'lint', '--extends', 'recommended', '--format', 'json', file];
  // The CLI exits 1 when it finds an error; the JSON report is on stdout either way.
  const stdout = await run(process.execPath, args, { cwd: dir, env, maxBuffer: 16 * 1024 * 1024 }).then(
    (r) => r.stdout,
    (err: { stdout?: string; stderr?: string; message: string }) => {
      if (!err.stdout?.trim().startsWith('{')) throw new Error(`redocly lint did not report: ${err.message}\n${err.stderr ?? ''}`);
      return err.stdout;
    },
  );
  return JSON.parse(stdout);
}

describe.each([
  { name: 'production', devMode: false },
  { name: 'dev mode', devMode: true },
])('the $name OpenAPI document under Redocly recommended', ({ devMode }) => {
  it('has no error and no warning', async () => {
    const file = join(dir, devMode ? 'dev.json' : 'production.json');
    await writeFile(file, JSON.stringify(buildOpenApiDocument({ devMode }), null, 2));
    const report = await lint(file);
    const problems = report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer ?? '?'}: ${p.message}`);
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);
});
