/**
 * Mutation testing of the modules that carry the state model's rules (`npm run mutate`; not part
 * of `npm test`: it runs the tests once per mutant). The report and what each survivor means:
 * bench/reports/mutation.md.
 */

import { readFileSync } from 'node:fs';

/**
 * `file:first-last`, the lines of the top-level function `name` in `file` (from its `function`
 * line to the first `}` at the start of a line after it), found now: line numbers written here
 * would point at other code after any edit of the file above the function.
 */
function linesOf(file, name) {
  const lines = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8').split('\n');
  const first = lines.findIndex((line) => new RegExp(`^(export )?function ${name}\\(`).test(line));
  const last = lines.findIndex((line, i) => i > first && line.startsWith('}'));
  if (first < 0 || last < 0) throw new Error(`stryker.config.mjs: no top-level function ${name} in ${file}`);
  return `${file}:${first + 1}-${last + 1}`;
}

// The HTTP property on the memory engine only, 10 scenarios of one seed: a mutant is killed or
// not the same way on every run (and in the dry run). The test runners inherit these.
process.env.REDPOINT_PROPERTY_ENGINES ??= 'memory';
process.env.REDPOINT_PROPERTY_RUNS ??= '10';
process.env.REDPOINT_PROPERTY_SEED ??= '20261206';

/** StrykerJS options (its `PartialStrykerOptions`). */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'scripts/mutation/vitest.config.ts' },
  plugins: ['@stryker-mutator/vitest-runner'],
  mutate: [
    'server/engine/rules.ts',
    'server/engine/state-text.ts',
    'server/engine/merge-ops.ts',
    // Only the run id a user's epoch is tied to (parseRunId, runOf): the trackers around it, and
    // the INFO they read, need real Redis servers.
    linesOf('server/engine/redis/runs.ts', 'parseRunId'),
    linesOf('server/engine/redis/runs.ts', 'runOf'),
  ],
  coverageAnalysis: 'perTest',
  concurrency: 2,
  timeoutMS: 20_000,
  reporters: ['clear-text', 'progress', 'json'],
  jsonReporter: { fileName: 'bench/reports/mutation/mutation.json' },
  // A run again after a change tests only the mutants whose code or covering tests changed.
  incremental: true,
  incrementalFile: 'bench/reports/mutation/stryker-incremental.json',
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
  ignoreStatic: true,
  thresholds: { high: 90, low: 80, break: null },
};
