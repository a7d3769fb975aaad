import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpRouter } from '../../server/gateway/http.js';
import { listenExclusive } from '../../server/gateway/listen.js';
import { closeApp, type TemplatedApp, uws } from '../../server/gateway/uws.js';
import { Metrics } from '../../server/metrics/metrics.js';
import { expectWithin } from '../helpers/bound.js';
import { silentLogger } from '../helpers/test-server.js';

/**
 * The router's bound on a request: it answers a request still waiting on a store in trouble
 * (503 with what is known), and leaves alone one doing long but healthy work.
 */
const BOUND_MS = 100;

describe('request bound', () => {
  let app: TemplatedApp;
  let url: string;
  let troubleFrom = Number.POSITIVE_INFINITY;
  /** Each request's handler waits for this long (the work it does). */
  let workMs = 0;
  beforeAll(async () => {
    app = uws.App();
    const router = new HttpRouter(app, new Metrics(), silentLogger, {
      requestTimeoutMs: BOUND_MS,
      storeTroubledSince: () => Date.now() >= troubleFrom,
    });
    const work = async () => {
      await delay(workMs);
      return { body: { done: true } };
    };
    router.route('post', '/work', work);
    router.route('get', '/work', work);
    const socket = await listenExclusive(app, '127.0.0.1', 0);
    url = `http://127.0.0.1:${uws.us_socket_local_port(socket)}/work`;
  });
  afterAll(() => closeApp(app));

  it('long healthy work is not cut at the bound', async () => {
    troubleFrom = Number.POSITIVE_INFINITY;
    workMs = BOUND_MS * 5;
    const res = await fetch(url, { method: 'POST' });
    expect(res.status).toBe(200);
  });

  it('once the store is in trouble, a waiting write is answered 503 outcome_unknown and a read 503 unavailable', async () => {
    // Longer than the allowed bound: a request that is not cut would answer 200, late.
    workMs = 30_000;
    troubleFrom = Date.now() + BOUND_MS * 2;
    const started = Date.now();
    const [write, read] = await Promise.all([fetch(url, { method: 'POST' }), fetch(url)]);
    const ms = Date.now() - started;
    expect([write.status, ((await write.json()) as { error: { code: string } }).error.code, write.headers.get('retry-after')]).toEqual([
      503,
      'outcome_unknown',
      '1',
    ]);
    expect([read.status, ((await read.json()) as { error: { code: string } }).error.code]).toEqual([503, 'unavailable']);
    // Answered at the first check after the trouble began (checks every 250 ms past the bound).
    expect(ms).toBeGreaterThanOrEqual(BOUND_MS * 2);
    expectWithin('a waiting request answered after the trouble began', ms, BOUND_MS * 2 + 250);
  });
});
