import { describe, expect, it } from 'vitest';
import { validCachedState } from '../../client-demo/sdk/src/cache/cache.js';
import { MemoryCache, type RedpointState } from '../../client-demo/sdk/src/index.js';
import { ConvStore } from '../../client-demo/sdk/src/store.js';
import type { ConvState } from '../../protocol/types.js';
import { sdkSuite } from './harness.js';
import { convergedTo, until } from './wait.js';

/**
 * The state a client saves and starts from (client-demo/sdk/src/cache/cache.ts): a client started
 * from it shows what the client that saved it showed, before its first pull. The harness's
 * groups above 3 members are read-diffused.
 */
const { h, client } = sdkSuite({ largeGroupThreshold: 3 });
const T0 = 1_760_000_000_000;
const shown = (s: RedpointState) => ({ conversations: s.conversations, totals: s.totals, mutedMentions: s.mutedMentions });

describe('a client started from its cache', () => {
  it("shows a read-diffused group's last activity, @all and non-counting seqs, and sums with the user's mutedMentions, before any pull", async () => {
    await h.members('ca-big', { add: ['ca-me', 'ca-p1', 'ca-p2', 'ca-p3'], category: 'group' });
    await h.members('ca-dm', { add: ['ca-me', 'ca-p1'] });
    await h.ok('PUT', '/v1/users/ca-me/conversations/ca-dm', { muted: true });
    await h.ok('PUT', '/v1/users/ca-me/settings', { mutedMentions: true });
    await h.post([
      { conv: 'ca-big', seq: 1, sender: 'ca-p1', at: T0 + 3_000 },
      { conv: 'ca-big', seq: 2, sender: 'ca-p2', mentionAll: true },
      { conv: 'ca-big', seq: 3, sender: 'ca-p3', counts: false },
      { conv: 'ca-dm', seq: 1, sender: 'ca-p1', mentions: ['ca-me'], at: T0 + 1_000 },
    ]);
    const cache = new MemoryCache();
    const first = client('ca-me', { cache });
    await first.start();
    const before = await convergedTo(h, first, 'ca-me');
    // What the cache must bring back: the @all counts, seq 3 does not, the group is newest, the muted mention counts.
    expect(before.conversations.map((v) => [v.conv, v.unread, v.mentions, v.at])).toEqual([
      ['ca-big', 2, 1, T0 + 3_000],
      ['ca-dm', 1, 1, T0 + 1_000],
    ]);
    expect(before.totals).toMatchObject({ total: 3, mentions: 2 });
    await first.stop();

    await h.down();
    const second = client('ca-me', { cache });
    await second.start();
    expect(second.state).toMatchObject({ status: 'DIRTY', stale: true });
    expect(shown(second.state)).toEqual(shown(before));
    await until(second, (s) => s.connection === 'offline', 'the failed connect');
    expect(shown(second.state)).toEqual(shown(before));
    await h.up();
    await convergedTo(h, second, 'ca-me');
  });
});

describe('the cache format', () => {
  const state = (conv: string, fields: Partial<ConvState> = {}): ConvState => ({
    conv,
    lastSeq: 0,
    readSeq: 0,
    mentions: 0,
    muted: false,
    markedUnread: false,
    category: 'default',
    large: false,
    deletedSeq: -1,
    ...fields,
  });

  it("a previous build's cache (format 2) is still read: its counts, heads and unacknowledged reads; no extras, mutedMentions off", () => {
    const old = {
      format: 2,
      uid: 'u',
      cursor: { epoch: 'e1', version: 4 },
      convs: [state('big', { large: true, lastSeq: 1 }), state('dm', { lastSeq: 3 })],
      heads: [['big', 5]],
      reads: [['dm', 2, 0]],
      savedAt: 1,
    };
    const cached = validCachedState(JSON.parse(JSON.stringify(old)));
    expect(cached).toMatchObject({ extras: [], mutedMentions: false });
    const store = new ConvStore();
    store.restore(cached ?? expect.fail('format 2 was rejected'));
    expect(store.view().conversations.map((v) => [v.conv, v.unread])).toEqual([
      ['big', 5],
      ['dm', 1],
    ]);
    expect(store.mutedMentions).toBe(false);
  });

  it('what this build writes reads back the same; anything else is discarded, not half-read', () => {
    const store = new ConvStore();
    store.applyReply({
      epoch: 'e1',
      snapshot: { v: 1, convs: [state('big', { large: true }), state('__proto__', { large: true, muted: true })] },
      entries: [],
      version: 1,
      more: false,
      heads: { big: 4, ['__proto__']: 2 },
      headAt: { big: T0 },
      mentionAll: { big: [2], ['__proto__']: [1] },
      nocount: { big: [3] },
      mutedMentions: true,
    });
    const written = store.toCache([], 0);
    const cached = validCachedState(JSON.parse(JSON.stringify(written)));
    expect(cached).toEqual(written);
    const restored = new ConvStore();
    restored.restore(cached ?? expect.fail('rejected'));
    expect(restored.view()).toEqual(store.view());
    expect(restored.view().totals).toMatchObject({ total: 4, mentions: 2 });

    const broken = (change: Record<string, unknown>) => validCachedState({ ...JSON.parse(JSON.stringify(written)), ...change });
    expect(broken({ format: 1 })).toBeUndefined();
    expect(broken({ format: 4 })).toBeUndefined();
    expect(broken({ extras: {} })).toBeUndefined();
    expect(broken({ extras: [{ conv: 'big', mentionAll: ['2'] }] })).toBeUndefined();
    expect(broken({ extras: [{ at: 1 }] })).toBeUndefined();
    expect(broken({ mutedMentions: 'yes' })).toBeUndefined();
  });
});
