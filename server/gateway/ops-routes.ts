import type { Engine } from '../engine/engine.js';
import type { Metrics } from '../metrics/metrics.js';
import type { HttpRouter } from './http.js';

/** Liveness, readiness and Prometheus metrics; unauthenticated by design (bind them privately). */
export function registerOpsRoutes(
  router: HttpRouter,
  { engine, metrics, database }: { engine: Engine; metrics: Metrics; database?: (() => Promise<boolean>) | undefined },
): string[] {
  router.route('get', '/healthz', async () => ({ body: { ok: true } }));
  // The gauge follows the store at every probe and scrape, not just start and shutdown.
  const checkReady = async (): Promise<boolean> => {
    const ready = await engine.ready().catch(() => false);
    metrics.ready.set(ready ? 1 : 0);
    return ready;
  };
  router.route('get', '/readyz', async () => {
    const ready = await checkReady();
    // PostgreSQL is reported, not required: Redis keeps serving while the durable tier waits.
    if (database) return { status: ready ? 200 : 503, body: { ready, engine: engine.kind, database: await database() } };
    return { status: ready ? 200 : 503, body: { ready, engine: engine.kind } };
  });
  router.route('get', '/metrics', async () => {
    await checkReady();
    return { body: null, text: { contentType: metrics.registry.contentType, content: await metrics.exposition() } };
  });
  return ['/healthz', '/readyz', '/metrics'];
}
