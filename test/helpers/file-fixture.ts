import { afterAll, beforeAll } from 'vitest';

/**
 * Something one test file shares (a redis-server, a Redis Cluster): started in beforeAll,
 * stopped in afterAll. Returns a getter that throws, naming the fixture, when called before the
 * start succeeded, instead of handing out undefined.
 */
export function fileFixture<T extends { stop(): Promise<void> }>(name: string, start: () => Promise<T>): () => T {
  let value: T | undefined;
  beforeAll(async () => {
    value = await start();
  });
  afterAll(async () => {
    await value?.stop();
  });
  return () => {
    if (!value) throw new Error(`${name} fixture not started`);
    return value;
  };
}
