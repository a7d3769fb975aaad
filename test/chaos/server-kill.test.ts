import { describe, expect, it } from 'vitest';
import { chaosFixture } from './fixture.js';
import { missingAcked, printFigures } from './ingest-load.js';

/**
 * Chaos: the server process is killed (-9) under ingest and started again on the same port and
 * Redis (AOF `always`). Every message it acknowledged before dying is in the store afterwards.
 */
describe('chaos: kill -9 of the server under ingest', () => {
  const chaos = chaosFixture();

  it('every acknowledged message is present after the restart', async () => {
    const { server: first, env, url, convs, load } = await chaos.takeoverSetup({ tag: 'k', count: 24, workers: 8, env: { STORE_TIMEOUT_MS: '1000' } });
    load.start();
    await load.ackedAtLeast(400);
    const killedAt = Date.now();
    first.proc.kill('SIGKILL');
    await first.exited;
    await chaos.spawn(env);
    const upAfterMs = Date.now() - killedAt;
    const ackedBefore = load.ackedSoFar;
    await load.ackedAtLeast(ackedBefore + 400);
    await load.stop();
    const missing = await missingAcked(url, load, convs);
    const f = load.figures();
    printFigures('server kill -9', { ...f, missing: missing.length, ackedAtKill: ackedBefore, serverBackAfterMs: upAfterMs });
    expect(missing).toEqual([]);
  });
});
