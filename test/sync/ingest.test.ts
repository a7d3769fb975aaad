import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../protocol/limits.js';
import type { Engine, RecordedMessage } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { mergeOps } from '../../server/engine/merge-ops.js';
import { FLUSH_LIMITS, Ingest } from '../../server/sync/ingest.js';
import { changeMembership } from '../../server/sync/membership.js';

const info = (conv: string, maxSeq: number, large: boolean, memberCount: number): RecordedMessage['info'] => ({
  conv,
  maxSeq,
  large,
  category: 'default',
  memberCount,
  gen: 1,
});

async function engineWith(convs: Record<string, string[]>): Promise<MemoryEngine> {
  const engine = new MemoryEngine({ snapshotEvery: 100, streamMaxLen: 1000 });
  for (const [conv, members] of Object.entries(convs)) await changeMembership(engine, 500, conv, { add: members, remove: [] });
  return engine;
}

describe('Ingest', () => {
  it('merges the submissions of one event-loop turn into one flush, and fails only those naming a conversation the store does not know', async () => {
    const engine = await engineWith({ real: ['alice', 'bob'] });
    const ingest = new Ingest(engine, 1);
    const batches: number[] = [];
    ingest.onFlush = (stats) => batches.push(stats.messages);

    // Submitted in one turn: one flush takes them all (the first does not take a flush alone).
    const first = ingest.submit([{ conv: 'real', seq: 1, sender: 'bob' }]);
    const good = ingest.submit([{ conv: 'real', seq: 2, sender: 'bob' }]);
    const ghost = ingest.submit([{ conv: 'ghost', seq: 1, sender: 'bob' }]);
    const mixed = ingest.submit([
      { conv: 'real', seq: 9, sender: 'bob' },
      { conv: 'ghost2', seq: 1, sender: 'bob' },
    ]);
    await first;
    await expect(good).resolves.toBeUndefined();
    await expect(ghost).rejects.toMatchObject({ code: 'unknown_conversation' });
    // A request naming an unknown conversation changes nothing, not even its known ones.
    await expect(mixed).rejects.toMatchObject({
      code: 'unknown_conversation',
      message: 'unknown conversation: ghost2; create it by adding its members (PUT /v1/conversations/ghost2/members, with the API key)',
    });
    // `mixed` is refused before the flush (it names an unknown conversation among several);
    // `ghost` goes in and is refused by the record step, which creates nothing.
    expect(batches).toEqual([3]);
    const alice = await engine.userState('alice');
    expect(alice.states.map((s) => [s.conv, s.lastSeq])).toEqual([['real', 2]]);
    expect(await engine.getConversation('ghost')).toBeNull();
    expect((await engine.getConversation('real'))?.maxSeq).toBe(2);
  });

  it('never merges more than a flush can carry: a burst goes out in several bounded flushes', async () => {
    const engine = await engineWith({ c: ['alice', 'bob'] });
    const ingest = new Ingest(engine, 1);
    const flushes: number[] = [];
    ingest.onFlush = (stats) => flushes.push(stats.messages);
    const perRequest = 1_000;
    const requests = Array.from({ length: 30 }, (_, r) =>
      ingest.submit(Array.from({ length: perRequest }, (_, i) => ({ conv: 'c', seq: r * perRequest + i + 1, sender: 'bob', mentions: ['alice'] }))),
    );
    await Promise.all(requests);
    expect(flushes.reduce((a, b) => a + b, 0)).toBe(30 * perRequest);
    expect(Math.max(...flushes)).toBeLessThanOrEqual(FLUSH_LIMITS.messages);
    const alice = (await engine.userState('alice')).states[0];
    expect(alice).toMatchObject({ lastSeq: 30 * perRequest, readSeq: 0, mentions: LIMITS.mentionSeqsPerConversation });
  });

  it('gives every member of a write-diffused conversation one op per flush, and nobody else', () => {
    const ops = mergeOps(
      [
        { conv: 'g', seq: 2, sender: 'bob', mentions: ['alice', 'mallory', 'bob'] },
        { conv: 'g', seq: 3, sender: 'outsider', mentions: ['carol'] },
      ],
      new Map([['g', { info: info('g', 3, false, 3), members: ['alice', 'bob', 'carol'] }]]),
    );
    expect(ops.map((op) => [op.uid, op.lastSeq, op.readSeq, op.mentionSeqs]).sort()).toEqual([
      ['alice', 3, 0, [2]],
      ['bob', 3, 2, []],
      ['carol', 3, 0, [3]],
    ]);
  });

  it('writes only to the listed senders and mentioned users of a read-diffused conversation', () => {
    const ops = mergeOps(
      [{ conv: 'big', seq: 9, sender: 'bob', mentions: ['alice', 'zed'] }],
      new Map([['big', { info: info('big', 9, true, 10_000), members: ['bob', 'alice'] }]]),
    );
    expect(ops.map((op) => [op.uid, op.lastSeq, op.readSeq, op.mentionSeqs])).toEqual([
      ['bob', 9, 9, []],
      ['alice', 9, 0, [9]],
    ]);
    // Each with the seq of its own message: the conversation's head is not theirs to follow.
    const two = mergeOps(
      [
        { conv: 'big', seq: 5, sender: 'bob', mentions: ['alice'] },
        { conv: 'big', seq: 9, sender: 'carol' },
      ],
      new Map([['big', { info: info('big', 9, true, 10_000), members: ['bob', 'alice', 'carol'] }]]),
    );
    expect(two.map((op) => [op.uid, op.lastSeq])).toEqual([
      ['bob', 5],
      ['alice', 5],
      ['carol', 9],
    ]);
  });

  it('keeps at most the newest LIMITS.mentionSeqsPerConversation mention seqs in one op', () => {
    const messages = Array.from({ length: 5_000 }, (_, i) => ({ conv: 'g', seq: i + 1, sender: 'bob', mentions: ['alice'] }));
    const [alice] = mergeOps(messages, new Map([['g', { info: info('g', 5_000, true, 2), members: ['bob', 'alice'] }]])).filter((op) => op.uid === 'alice');
    expect(alice?.mentionSeqs).toHaveLength(LIMITS.mentionSeqsPerConversation);
    expect(alice?.mentionSeqs[0]).toBe(5_000 - LIMITS.mentionSeqsPerConversation + 1);
    expect(alice?.mentionSeqs.at(-1)).toBe(5_000);
  });

  it('asks the store which conversations exist only for requests that name several', async () => {
    const engine = await engineWith({ a: ['u'], b: ['u'] });
    const asked: string[][] = [];
    const spy: Engine = Object.assign(Object.create(engine) as MemoryEngine, {
      missingConversations: async (convs: readonly string[]) => {
        asked.push([...convs]);
        return engine.missingConversations(convs);
      },
    });
    const ingest = new Ingest(spy, 4);
    await ingest.submit([{ conv: 'a', seq: 1, sender: 'x' }]);
    expect(asked).toEqual([]);
    await ingest.submit([
      { conv: 'a', seq: 2, sender: 'x' },
      { conv: 'b', seq: 1, sender: 'x' },
    ]);
    expect(asked).toEqual([['a', 'b']]);
  });
});
