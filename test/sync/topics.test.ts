import { describe, expect, it } from 'vitest';
import { topicConv } from '../../protocol/child-id.js';
import type { Engine, MembersChange } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { SyncService } from '../../server/sync/sync-service.js';

/** A memory engine that records the changeMembers calls made on topics' children. */
function recording(engine: MemoryEngine): { engine: Engine; childCalls: Array<{ conv: string; change: MembersChange }> } {
  const childCalls: Array<{ conv: string; change: MembersChange }> = [];
  const proxy = new Proxy(engine, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (prop === 'changeMembers' && String(args[0]).includes('#t:')) childCalls.push({ conv: args[0] as string, change: args[1] as MembersChange });
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { engine: proxy, childCalls };
}

const members = async (engine: Engine, conv: string) => ((await engine.roster(conv))?.members ?? []).map((m) => m.uid).sort();

/**
 * sync/topics.ts: a membership change of a conversation reaches its topics as the change itself
 * (a delta) where the topic's child holds the roster the change was made from, and as the whole
 * roster where it does not. The interleavings of both with a topic's first message are
 * test/sync/interleavings.ts's; the store's side of the guard is the conformance suite's.
 */
describe('topics: a membership change reaches each topic', () => {
  const roster = Array.from({ length: 50 }, (_, i) => `m${i}`);

  it('as a delta: each topic is sent the joiner and the leaver, not the 50 members', async () => {
    const memory = new MemoryEngine({ snapshotEvery: 10, streamMaxLen: 100 });
    const { engine, childCalls } = recording(memory);
    const sync = new SyncService(engine, { largeGroupThreshold: 1000 });
    await sync.changeMembers('team', { add: roster, remove: [] });
    await sync.postMessages([
      { conv: 'team', topic: 'a', seq: 1, sender: 'm0' },
      { conv: 'team', topic: 'b', seq: 1, sender: 'm0' },
    ]);
    childCalls.length = 0;
    await sync.changeMembers('team', { add: ['joiner'], remove: ['m1'] });
    expect(childCalls.map((c) => [c.conv, c.change.add, c.change.remove]).sort()).toEqual([
      [topicConv('team', 'a'), ['joiner'], ['m1']],
      [topicConv('team', 'b'), ['joiner'], ['m1']],
    ]);
    const expected = [...roster.filter((uid) => uid !== 'm1'), 'joiner'].sort();
    for (const topic of ['a', 'b']) expect(await members(memory, topicConv('team', topic))).toEqual(expected);
    expect((await memory.userState('joiner')).states.map((s) => s.conv).sort()).toEqual(['team', topicConv('team', 'a'), topicConv('team', 'b')]);
    expect((await memory.userState('m1')).states).toEqual([]);
  });

  it('from the whole roster where the topic missed a change: the next change brings it up to date', async () => {
    const memory = new MemoryEngine({ snapshotEvery: 10, streamMaxLen: 100 });
    const { engine, childCalls } = recording(memory);
    const sync = new SyncService(engine, { largeGroupThreshold: 1000 });
    await sync.changeMembers('team', { add: ['a', 'b', 'c'], remove: [] });
    await sync.postMessages([{ conv: 'team', topic: 't', seq: 1, sender: 'a' }]);
    // A change whose topic sync never ran (the process died after the conversation's step).
    await memory.changeMembers('team', { add: [], remove: ['b'], threshold: 1000 });
    childCalls.length = 0;
    await sync.changeMembers('team', { add: ['d'], remove: [] });
    // The delta found the topic behind; the whole roster followed.
    expect(childCalls.map((c) => c.change.add)).toEqual([['d'], ['a', 'c', 'd']]);
    expect(await members(memory, topicConv('team', 't'))).toEqual(['a', 'c', 'd']);
  });
});
