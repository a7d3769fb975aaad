import { describe, expect, it } from 'vitest';
import type { Engine } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { OutcomeUnknownError, StoreUnavailableError } from '../../server/engine/store-errors.js';
import { SyncService } from '../../server/sync/sync-service.js';

/** A memory engine whose `method` fails as a store that went away would ("nothing applied"). */
function failing(engine: MemoryEngine, method: keyof Engine): Engine {
  return new Proxy(engine, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (prop === method) return async () => Promise.reject(new StoreUnavailableError('not_ready', 'Redis went away'));
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('a change made of several store calls, cut off after the first landed', () => {
  it('an ingest whose heads moved but whose user steps failed says outcome unknown, not unavailable', async () => {
    const engine = new MemoryEngine({ snapshotEvery: 10, streamMaxLen: 100 });
    await new SyncService(engine, { largeGroupThreshold: 10 }).changeMembers('c', { add: ['a', 'b'], remove: [] });
    const sync = new SyncService(failing(engine, 'applyUserOps'), { largeGroupThreshold: 10 });
    await expect(sync.postMessages([{ conv: 'c', seq: 1, sender: 'a' }])).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect((await engine.getConversation('c'))?.maxSeq).toBe(1);
  });

  it('an ingest refused before any write says unavailable', async () => {
    const engine = new MemoryEngine({ snapshotEvery: 10, streamMaxLen: 100 });
    const sync = new SyncService(failing(engine, 'recordMessages'), { largeGroupThreshold: 10 });
    await expect(sync.postMessages([{ conv: 'c', seq: 1, sender: 'a' }])).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  it('a membership change whose conversation step landed says outcome unknown when a member step fails', async () => {
    const engine = new MemoryEngine({ snapshotEvery: 10, streamMaxLen: 100 });
    const sync = new SyncService(failing(engine, 'applyUserOps'), { largeGroupThreshold: 10 });
    await expect(sync.changeMembers('c', { add: ['a'], remove: [] })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const retry = new SyncService(engine, { largeGroupThreshold: 10 });
    await retry.changeMembers('c', { add: ['a'], remove: [] });
    expect((await engine.userState('a')).states.map((s) => s.conv)).toEqual(['c']);
  });

  it('a sharing setting written whose drop of positions then fails says outcome unknown (the setting is changed), and the retry finishes it', async () => {
    const engine = new MemoryEngine({ snapshotEvery: 10, streamMaxLen: 100 });
    const sync = new SyncService(engine, { largeGroupThreshold: 10 });
    await sync.changeMembers('c', { add: ['a', 'b'], remove: [] });
    await sync.postMessages([{ conv: 'c', seq: 1, sender: 'b' }]);
    await sync.readBatch('a', [['c', 1]]);
    expect((await sync.unread('b')).conversations[0]?.peerReadSeq).toBe(1);
    const cut = new SyncService(failing(engine, 'userState'), { largeGroupThreshold: 10 });
    await expect(cut.receipts.setSharing('a', false)).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect(await sync.receipts.sharing('a')).toBe(false);
    await sync.receipts.setSharing('a', false);
    expect((await sync.unread('b')).conversations[0]?.peerReadSeq).toBeUndefined();
  });
});
