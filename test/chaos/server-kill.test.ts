import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/processes.js';
import { chaosFixture } from './fixture.js';
import { conversations, createConversations, IngestLoad, missingAcked, printFigures } from './ingest-load.js';

/**
 * Chaos: the server process is killed (-9) under ingest and started again on the same port and
 * Redis (AOF `always`). Every message it acknowledged before dying is in the store afterwards.
 */
describe('chaos: kill -9 of the server under ingest', () => {
  const chaos = chaosFixture();

  it('every acknowledged message is present after the restart', async () => {
    const port = await freePort();
    const env = { PORT: String(port), STORE_TIMEOUT_MS: '1000' };
    const first = await chaos.spawn(env);
    const url = `http://127.0.0.1:${port}`;
    const convs = conversations(24, 'k');
    await createConversations(url, convs);
    const load = new IngestLoad(() => url, convs, 8);
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
