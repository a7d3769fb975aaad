import { defineConfig } from 'vitest/config';

/**
 * The tests StrykerJS runs against each mutant (scripts/mutation/stryker.config.mjs): the fast,
 * in-process ones that exercise the mutated modules. The Redis and PostgreSQL suites are left out:
 * each mutant would start servers, and a run would take hours on two cores.
 */
export default defineConfig({
  test: {
    include: [
      'test/engine/memory.test.ts',
      'test/engine/memory-structures.test.ts',
      'test/engine/rules.test.ts',
      'test/engine/runs.test.ts',
      'test/engine/state-text.test.ts',
      'test/sync/ingest.test.ts',
      'test/http/property.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
