import { describe, expect, it } from 'vitest';
import { resetRead } from '../../server/admin/reset-read.js';
import type { Engine } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { changeMembership } from '../../server/sync/membership.js';
import { SyncService } from '../../server/sync/sync-service.js';

/**
 * Telling `not_a_member` from `unknown_conversation` costs one store call (which conversations
 * exist), made only once an op was refused: a member's read, settings or reset goes to the store
 * once, as before the two codes were told apart.
 */
async function watchedEngine(): Promise<{ engine: Engine; asked: string[][] }> {
  const engine = new MemoryEngine({ snapshotEvery: 100, streamMaxLen: 1000 });
  await changeMembership(engine, 500, 'ours', { add: ['alice', 'bob'], remove: [] });
  await changeMembership(engine, 500, 'theirs', { add: ['carol'], remove: [] });
  const asked: string[][] = [];
  const spy: Engine = Object.assign(Object.create(engine) as MemoryEngine, {
    missingConversations: async (convs: readonly string[]) => {
      asked.push([...convs]);
      return engine.missingConversations(convs);
    },
  });
  return { engine: spy, asked };
}

describe('conversation refusals', () => {
  it("a member's read, batch, settings and reset never ask which conversations exist", async () => {
    const { engine, asked } = await watchedEngine();
    const sync = new SyncService(engine, { largeGroupThreshold: 500 });
    await sync.read('alice', 'ours', 1);
    expect(await sync.readBatch('alice', [['ours', 1]])).toMatchObject({ rejected: [] });
    await sync.updateSettings('alice', 'ours', { muted: true });
    await resetRead(engine, 'alice', 'ours', 0);
    expect(asked).toEqual([]);
  });

  it('a refused op asks once, for the refused conversations only, and names the right code', async () => {
    const { engine, asked } = await watchedEngine();
    const sync = new SyncService(engine, { largeGroupThreshold: 500 });
    await expect(sync.read('alice', 'theirs', 1)).rejects.toMatchObject({ code: 'not_a_member', status: 403 });
    await expect(sync.read('alice', 'nowhere', 1)).rejects.toMatchObject({ code: 'unknown_conversation', status: 404 });
    await expect(resetRead(engine, 'alice', 'theirs', 0)).rejects.toMatchObject({ code: 'not_a_member' });
    const batch = await sync.readBatch('alice', [
      ['ours', 1],
      ['theirs', 1],
      ['nowhere', 1],
    ]);
    expect(batch.rejected).toEqual([
      { conv: 'theirs', code: 'not_a_member' },
      { conv: 'nowhere', code: 'unknown_conversation' },
    ]);
    expect(asked).toEqual([['theirs'], ['nowhere'], ['theirs'], ['theirs', 'nowhere']]);
  });
});
