import { describe, expect, it } from 'vitest';
import { staleDocs } from './figures.js';

/**
 * The SDK's bundle sizes are quoted by more than one doc: each quote must be the one recorded in
 * docs/figures/sdk-bundle.json (whose figures test/package/sdk-package.test.ts checks against a
 * real bundle). A doc edited by hand, or a source updated without its docs, fails here.
 */
describe('figures quoted in the docs', () => {
  it('are rendered from the recorded source', async () => {
    expect(await staleDocs(), 'rewrite them: REDPOINT_UPDATE_FIGURES=1 npx vitest run test/package/sdk-package.test.ts').toEqual([]);
  });
});
