import { describe, expect, it } from 'vitest';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { SyncEvents } from '../../server/sync/events.js';
import { FlushGate } from '../../server/sync/flush-gate.js';
import { Ingest, mergeOps } from '../../server/sync/ingest.js';

describe('Ingest', () => {
  it('merges queued submissions into one flush, and fails only those naming a conversation the store does not know', async () => {
    const engine = new MemoryEngine({ snapshotEvery: 100, streamMaxLen: 1000 });
    await engine.ensureConversation('real');
    await engine.changeMembers('real', ['alice', 'bob'], []);
    await engine.applyUserOps([
      { type: 'join', uid: 'alice', conv: 'real', head: 0, category: 'default', large: false },
      { type: 'join', uid: 'bob', conv: 'real', head: 0, category: 'default', large: false },
    ]);
    const ingest = new Ingest(engine, new FlushGate(), new SyncEvents(), 1);
    const batches: number[] = [];
    ingest.onFlush = (stats) => batches.push(stats.messages);

    // The first occupies the only flush slot; the next two queue and go out together.
    const first = ingest.submit([{ conv: 'real', seq: 1, sender: 'bob' }]);
    const good = ingest.submit([{ conv: 'real', seq: 2, sender: 'bob' }]);
    const ghost = ingest.submit([{ conv: 'ghost', seq: 1, sender: 'bob' }]);
    await first;
    await expect(good).resolves.toBeUndefined();
    await expect(ghost).rejects.toMatchObject({ code: 'unknown_conversation' });
    expect(batches).toEqual([1, 2]);
    const alice = await engine.userState('alice');
    expect(alice.states.map((s) => [s.conv, s.lastSeq])).toEqual([['real', 2]]);
    expect(await engine.getConversation('ghost')).toBeNull();
  });

  it('gives every member of a write-diffused conversation one op per flush, and nobody else', () => {
    const members = ['alice', 'bob', 'carol'];
    const info = { conv: 'g', maxSeq: 3, large: false, category: 'default', memberCount: 3 };
    const ops = mergeOps(
      [
        { conv: 'g', seq: 2, sender: 'bob', mentions: ['alice', 'mallory', 'bob'] },
        { conv: 'g', seq: 3, sender: 'outsider', mentions: ['carol'] },
      ],
      new Map([['g', { info, members }]]),
    );
    expect(ops.map((op) => [op.uid, op.lastSeq, op.readSeq, op.mentionSeqs])).toEqual([
      ['alice', 3, 0, [2]],
      ['bob', 3, 2, []],
      ['carol', 3, 0, [3]],
    ]);
  });

  it('writes only to senders and mentioned users of a read-diffused conversation', () => {
    const info = { conv: 'big', maxSeq: 9, large: true, category: 'default', memberCount: 10_000 };
    const ops = mergeOps([{ conv: 'big', seq: 9, sender: 'bob', mentions: ['alice'] }], new Map([['big', { info }]]));
    expect(ops.map((op) => [op.uid, op.lastSeq, op.readSeq, op.mentionSeqs])).toEqual([
      ['bob', 9, 9, []],
      ['alice', 9, 0, [9]],
    ]);
  });
});
