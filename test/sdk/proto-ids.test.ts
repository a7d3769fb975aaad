import { describe, expect, it } from 'vitest';
import { jsonCodec } from '../../client-demo/sdk/src/codec.js';
import { MemoryCache, type RedpointClient } from '../../client-demo/sdk/src/index.js';
import { msgpack } from '../../client-demo/sdk/src/msgpack.js';
import { ConvStore } from '../../client-demo/sdk/src/store.js';
import { encodeMsgpack } from '../../protocol/codec.js';
import type { SyncFrame } from '../../protocol/frames.js';
import type { ConvState, PullReply } from '../../protocol/types.js';
import { sdkSuite } from './harness.js';
import { convergedTo, unreadOf, until } from './wait.js';

/**
 * Conversation ids and categories are any `^[A-Za-z0-9_.:@-]+$`, so `__proto__`, `constructor`,
 * `toString` and `hasOwnProperty` are valid ones. Wherever the SDK keys something by them (its
 * store, heads, totals by category, the cache), they must count like any other id.
 */
const NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty'] as const;

function state(conv: string, category: string, fields: Partial<ConvState> = {}): ConvState {
  return { conv, lastSeq: 0, readSeq: 0, mentions: 0, muted: false, markedUnread: false, category, large: false, deletedSeq: -1, ...fields };
}

/**
 * A first sync as the server sends it: NAMES[i] in category NAMES[(i + 1) % 4], with i + 1
 * unread; `__proto__` and `toString` are read-diffused, their unread coming from `heads`.
 */
function firstSync(): SyncFrame {
  const convs = NAMES.map((name, i) => {
    const large = name === '__proto__' || name === 'toString';
    return state(name, NAMES[(i + 1) % 4] ?? 'default', { large, lastSeq: large ? 0 : i + 1 });
  });
  // Built from entries, as a server does: an own `__proto__` key, not the prototype.
  const heads = Object.fromEntries([
    ['__proto__', 1],
    ['toString', 3],
  ]) as Record<string, number>;
  const sync: SyncFrame & PullReply = { t: 'sync', epoch: 'e1', snapshot: { v: 4, convs }, entries: [], version: 4, more: false, heads };
  return sync;
}

/** A computed `['__proto__']` key in a literal is an own property (a plain `__proto__:` would set the prototype). */
const EXPECTED_CATEGORIES = { constructor: 1, toString: 2, hasOwnProperty: 3, ['__proto__']: 4 };

const entries = (record: Record<string, number>): Array<[string, number]> => Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1));

function viewOf(store: ConvStore) {
  const { conversations, totals } = store.view();
  return { unread: Object.fromEntries(conversations.map((c) => [c.conv, c.unread])), totals };
}

describe('prototype-named ids in the store', () => {
  for (const [name, codec, encode] of [
    ['JSON', jsonCodec, (f: SyncFrame) => JSON.stringify(f)],
    ['MessagePack', msgpack, (f: SyncFrame) => encodeMsgpack(f)],
  ] as const) {
    it(`a ${name} sync with them: every conversation, head, category and total is right`, () => {
      const decoded = codec.decode(encode(firstSync())) as SyncFrame | null;
      expect(decoded && Object.keys(decoded.heads).sort()).toEqual(['__proto__', 'toString']);
      const store = new ConvStore();
      expect(decoded && store.applyReply(decoded)).toBe('applied');
      const { unread, totals } = viewOf(store);
      expect(entries(unread)).toEqual(entries(Object.fromEntries(NAMES.map((n, i) => [n, i + 1]))));
      expect(totals.total).toBe(10);
      expect(entries(totals.categories)).toEqual(entries(EXPECTED_CATEGORIES));
      for (const [category, n] of Object.entries(EXPECTED_CATEGORIES)) expect(totals.categories[category]).toBe(n);
      expect(Object.getPrototypeOf(totals.categories)).toBe(null);
    });
  }

  it('head pushes, reads, settings and the cache keep them apart from the prototype', async () => {
    const store = new ConvStore();
    store.applyReply(JSON.parse(JSON.stringify(firstSync())) as SyncFrame);
    store.applyHead({ t: 'head', conv: '__proto__', lastSeq: 6 });
    store.applyHead({ t: 'head', conv: 'toString', lastSeq: 2 });
    store.optimisticRead('constructor', 1, 0);
    store.optimisticSettings('hasOwnProperty', { muted: true });
    const shown = viewOf(store);
    expect(entries(shown.unread)).toEqual(entries({ constructor: 1, toString: 3, hasOwnProperty: 4, ['__proto__']: 6 }));
    // hasOwnProperty is muted: its category (__proto__) drops out of the totals.
    expect(shown.totals.total).toBe(10);
    expect(entries(shown.totals.categories)).toEqual(entries({ constructor: 6, toString: 1, hasOwnProperty: 3 }));

    const cache = new MemoryCache();
    await cache.save(store.toCache([['toString', 1, 0]], 0));
    const cached = await cache.load();
    if (!cached) throw new Error('nothing cached');
    const restored = new ConvStore();
    restored.restore(cached);
    expect(entries(viewOf(restored).unread)).toEqual(entries({ constructor: 2, toString: 2, hasOwnProperty: 4, ['__proto__']: 6 }));
    expect(restored.lastSeq('__proto__')).toBe(6);
    expect(restored.lastSeq('valueOf')).toBe(0);
  });
});

describe('prototype-named ids against the server', () => {
  const { h, client } = sdkSuite({ largeGroupThreshold: 3 });

  /** SYNCED, exactly the server's summary, and these totals (worked out here, not taken from it). */
  async function shows(c: RedpointClient, uid: string, total: number, categories: Record<string, number>): Promise<void> {
    const s = await convergedTo(h, c, uid);
    expect(s.totals?.total).toBe(total);
    expect(entries(s.totals?.categories ?? {})).toEqual(entries(categories));
  }

  it('conversations and categories named __proto__, constructor, toString, hasOwnProperty count right (JSON and MessagePack clients)', async () => {
    const users = { 'proto-json': jsonCodec, 'proto-msgpack': msgpack };
    const me = Object.keys(users);
    // As in firstSync(): NAMES[i] in category NAMES[i + 1], with i + 1 messages; `__proto__` and
    // `toString` are large groups (read diffusion: their unread comes from heads).
    for (const [i, conv] of NAMES.entries()) {
      const large = conv === '__proto__' || conv === 'toString';
      await h.members(conv, { add: large ? [...me, 'p-b', 'p-c'] : [...me, 'p-b'], category: NAMES[(i + 1) % 4] ?? 'default' });
    }
    for (const [i, conv] of NAMES.entries()) for (let seq = 1; seq <= i + 1; seq++) await h.post({ conv, seq, sender: 'p-b' });
    const clients = Object.entries(users).map(([uid, codec]) => ({ uid, c: client(uid, { codec }) }));
    await Promise.all(clients.map(({ c }) => c.start()));
    for (const { uid, c } of clients) {
      await shows(c, uid, 10, EXPECTED_CATEGORIES);
      expect(entries(Object.fromEntries(c.state.conversations.map((v) => [v.conv, v.unread])))).toEqual(
        entries(Object.fromEntries(NAMES.map((n, i) => [n, i + 1]))),
      );
    }
    await h.post({ conv: '__proto__', seq: 2, sender: 'p-b' });
    for (const { c } of clients) {
      await until(c, (st) => unreadOf(st, '__proto__') === 2, 'a head push for __proto__');
      c.markRead('constructor');
    }
    for (const { uid, c } of clients) await shows(c, uid, 9, { constructor: 2, hasOwnProperty: 3, ['__proto__']: 4 });
  });
});
