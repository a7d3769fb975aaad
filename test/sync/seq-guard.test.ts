import { afterEach, describe, expect, it } from 'vitest';
import { RedpointError } from '../../protocol/errors.js';
import { SeqGuard } from '../../server/sync/seq-guard.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

interface ErrorBody {
  error: { code: string; message: string };
}

/**
 * Seq sanity with the settings an adopter starts with (no MAX_SEQ_JUMP set): a message id or a
 * timestamp sent as a seq is refused before it makes a badge of a trillion, the first message of
 * a conversation (head 0) included, and the error says which head, which seq and which setting.
 */
describe('seq guard by default', () => {
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const start = async (): Promise<TestServer> => {
    const s = await startTestServer();
    servers.push(s);
    await s.members('team', { add: ['ann', 'ben'] });
    return s;
  };

  it('refuses a millisecond timestamp as the first seq of a conversation (head 0), naming head, seq and MAX_SEQ_JUMP', async () => {
    const s = await start();
    const refused = await s.api<ErrorBody>('POST', '/v1/messages', { conv: 'team', seq: 1_796_520_749_000, sender: 'ben' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('seq_jump');
    expect(refused.body.error.message).toMatch(/seq 1796520749000 .* head 0\b.*MAX_SEQ_JUMP 100000/);
    expect((await s.unread('ann')).total).toBe(0);
  });

  it('refuses a jump from a live head and applies dense seqs', async () => {
    const s = await start();
    await s.post({ conv: 'team', seq: 1, sender: 'ben' });
    const refused = await s.api<ErrorBody>('POST', '/v1/messages', { conv: 'team', seq: 1_796_520_749, sender: 'ben' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.message).toMatch(/seq 1796520749 .* head 1\b.*MAX_SEQ_JUMP 100000/);
    await s.post({ conv: 'team', seq: 2, sender: 'ben' });
    expect((await s.unread('ann')).total).toBe(2);
  });

  it("measures a topic's seq against the topic's own head (0 before its first message), not its conversation's (PROTOCOL.md \"Topics\")", async () => {
    const s = await start();
    for (let seq = 1; seq <= 2; seq++) await s.post({ conv: 'team', seq, sender: 'ben' });
    // The conversation's head (2) is not the topic's (0): a jump in the topic is refused on its own.
    const refused = await s.api<ErrorBody>('POST', '/v1/messages', { conv: 'team', topic: 'design', seq: 100_002, sender: 'ben' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.message).toMatch(/head 0\b/);
    await s.post({ conv: 'team', topic: 'design', seq: 1, sender: 'ben' });
    const later = await s.api<ErrorBody>('POST', '/v1/messages', { conv: 'team', topic: 'design', seq: 100_002, sender: 'ben' });
    expect(later.body.error.message).toMatch(/conversation team#t:design .* head 1\b/);
    expect((await s.unread('ann')).total).toBe(3);
  });

  it('measures a thread reply\'s seq against the thread\'s own head (0 before its first reply) (PROTOCOL.md "Threads")', async () => {
    const s = await start();
    for (let seq = 1; seq <= 2; seq++) await s.post({ conv: 'team', seq, sender: 'ben' });
    const refused = await s.api<ErrorBody>('POST', '/v1/messages', { conv: 'team', thread: 1, seq: 100_002, sender: 'ben' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.message).toMatch(/conversation team#r:1 .* head 0\b/);
    await s.post({ conv: 'team', thread: 1, seq: 1, sender: 'ben' });
    const later = await s.api<ErrorBody>('POST', '/v1/messages', { conv: 'team', thread: 1, seq: 100_002, sender: 'ben' });
    expect(later.body.error.message).toMatch(/conversation team#r:1 .* head 1\b/);
  });
});

/**
 * The guard's round trips: a head read vouches for dense seqs for HEAD_MEMORY_MS (heads only
 * rise, so it is a lower bound), a seq past it is measured against the store's head again, and
 * a rebase makes the process forget it.
 */
describe('seq guard: remembered heads', () => {
  const setup = () => {
    const store = new Map<string, number>([['c', 10]]);
    const reads: string[][] = [];
    let now = 0;
    const guard = new SeqGuard(
      {
        heads: async (convs) => {
          reads.push([...convs]);
          return new Map(convs.flatMap((c) => (store.has(c) ? [[c, store.get(c) ?? 0] as const] : [])));
        },
      },
      { maxJump: 100, action: 'refuse', headMemoryMs: 1_000, now: () => now },
      () => undefined,
    );
    return { store, reads, guard, tick: (ms: number) => (now += ms) };
  };
  const refusedWith = async (p: Promise<void>): Promise<string> => {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    return err instanceof RedpointError ? err.code : 'passed';
  };

  it('reads a head once for dense traffic, again past the jump or after the memory lapses', async () => {
    const { store, reads, guard, tick } = setup();
    for (let seq = 11; seq <= 60; seq++) await guard.check([{ conv: 'c', seq }]);
    expect(reads).toEqual([['c']]);
    // 10 + 100 is the remembered bound; the store's head has moved on, so 150 passes after a read.
    store.set('c', 60);
    await guard.check([{ conv: 'c', seq: 150 }]);
    expect(reads).toHaveLength(2);
    expect(await refusedWith(guard.check([{ conv: 'c', seq: 161 }]))).toBe('seq_jump');
    tick(1_000);
    await guard.check([{ conv: 'c', seq: 61 }]);
    expect(reads).toHaveLength(4);
  });

  it('after forget (a rebase lowered the head), a seq is measured from the store again', async () => {
    const { store, reads, guard } = setup();
    await guard.check([{ conv: 'c', seq: 11 }]);
    store.set('c', 1);
    // Still within 10 + 100 of the remembered head: passes without a read until forgotten.
    await guard.check([{ conv: 'c', seq: 105 }]);
    expect(reads).toHaveLength(1);
    guard.forget('c');
    expect(await refusedWith(guard.check([{ conv: 'c', seq: 105 }]))).toBe('seq_jump');
    expect(reads).toHaveLength(2);
  });
});
