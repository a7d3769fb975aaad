import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'server/**/*.test.ts', 'protocol/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Redis-backed suites each start their own redis-server; a few in parallel is fine on 2 cores.
    maxWorkers: 2,
  },
});
