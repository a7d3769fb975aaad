import { describe, expect, it } from 'vitest';
import { ClosedError, type RedpointState } from '../../client-demo/sdk/src/index.js';
import { sdkSuite } from './harness.js';
import { convergedTo, unreadOf, until } from './wait.js';

const { h, client, started } = sdkSuite();

/** Every change event `c` emits from now on. */
function changes(c: { on(type: 'change', listener: (s: RedpointState) => void): () => void }): RedpointState[] {
  const seen: RedpointState[] = [];
  c.on('change', (s) => seen.push(s));
  return seen;
}

const tick = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

async function dms(prefix: string, names: string[]): Promise<void> {
  for (const name of names) {
    await h.members(`${prefix}-${name}`, { add: [`${prefix}-me`, `${prefix}-peer`] });
    await h.post({ conv: `${prefix}-${name}`, seq: 1, sender: `${prefix}-peer` });
  }
}

describe('change events', () => {
  it('a burst of calls in one task is one event, after it', async () => {
    await dms('e1', ['a', 'b', 'c']);
    const c = await started('e1-me');
    const seen = changes(c);
    c.markRead('e1-a');
    c.markRead('e1-b');
    c.markRead('e1-c');
    // The state is current at once; the event comes after the burst.
    expect(c.state.totals?.total).toBe(0);
    expect(seen).toHaveLength(0);
    await tick();
    expect(seen).toHaveLength(1);
    expect(seen[0]?.totals?.total).toBe(0);
  });

  it('never fires twice in a row for the same picture, over a whole session', async () => {
    await dms('e2', ['a', 'b']);
    const c = client('e2-me', { readBatchMs: 10 });
    const seen = changes(c);
    await c.start();
    await convergedTo(h, c, 'e2-me');
    for (let seq = 2; seq <= 4; seq++) await h.post({ conv: 'e2-a', seq, sender: 'e2-peer' });
    await until(c, (s) => unreadOf(s, 'e2-a') === 4, 'four unread');
    c.markRead('e2-a');
    await c.mute('e2-b');
    await convergedTo(h, c, 'e2-me');
    await h.down();
    await until(c, (s) => s.connection === 'offline', 'offline');
    await h.up();
    await convergedTo(h, c, 'e2-me');
    expect(seen.length).toBeGreaterThan(5);
    for (let i = 1; i < seen.length; i++) expect(JSON.stringify(seen[i]), `event ${i} repeats event ${i - 1}`).not.toBe(JSON.stringify(seen[i - 1]));
  });

  it('state keeps its identity while nothing changed (a useSyncExternalStore snapshot)', async () => {
    await dms('e3', ['a']);
    const c = await started('e3-me');
    const seen = changes(c);
    const before = c.state;
    expect(c.state).toBe(before);
    // Calls that change nothing: a read below what is read, a flush with nothing queued.
    c.markRead('e3-a', 0);
    c.flushReads();
    await tick();
    expect(c.state).toBe(before);
    expect(seen).toHaveLength(0);
    c.markRead('e3-a');
    expect(c.state).not.toBe(before);
  });
});

describe('ready()', () => {
  it('resolves on the first SYNCED state, and at once afterwards', async () => {
    await dms('e4', ['a']);
    const c = client('e4-me');
    const statusAtReady: string[] = [];
    const ready = c.ready().then(() => statusAtReady.push(c.state.status));
    await c.start();
    expect(statusAtReady).toEqual([]);
    await ready;
    expect(statusAtReady).toEqual(['SYNCED']);
    expect(c.state.totals?.total).toBe(1);
    await h.down();
    await until(c, (s) => s.connection === 'offline', 'offline');
    await expect(c.ready()).resolves.toBeUndefined();
  });

  it('rejects when the server closes for good before the first sync (4002 unauthorized)', async () => {
    const c = client('e5-me', { token: async () => 'not-a-jwt' });
    const ready = c.ready();
    await c.start();
    const err = await ready.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClosedError);
    expect((err as ClosedError).closeCode).toBe(4002);
    await expect(c.ready()).rejects.toBeInstanceOf(ClosedError);
  });

  it('rejects when the client is stopped before the first sync', async () => {
    const c = client('e6-me', { token: () => new Promise(() => undefined) });
    await c.start();
    const ready = c.ready();
    await c.stop();
    await expect(ready).rejects.toThrow('client stopped');
  });
});
