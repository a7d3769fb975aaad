import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../protocol/limits.js';
import type { EngineKind } from '../../server/engine/engine.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * Valid input that is hostile anyway: a burst that group commit merges into one huge op, and ids
 * named like Object.prototype members. Both broke the server before (a crash; `total: null`,
 * function source in `categories`, `{"t":"head","lastSeq":{}}`).
 */
const ENGINES: EngineKind[] = ['memory', 'redis'];

describe.each(ENGINES)('hostile but valid input (%s engine)', (engine) => {
  let s: TestServer;
  beforeAll(async () => {
    // 110,000 seqs of one conversation in flight at once: more than MAX_SEQ_JUMP's default lets
    // run ahead of the head (docs/configuration.md, Seq sanity), so the check is off here.
    s = await startTestServer({ engine, largeGroupThreshold: 3, snapshotEvery: 20, streamMaxLen: 200, config: { maxSeqJump: 0 } });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('110 concurrent requests of 1,000 messages mentioning one user: all 200, exact counts', async () => {
    await s.members('burst', { add: ['alice', 'bob'] });
    const requests = 110;
    const perRequest = 1_000;
    const replies = await Promise.all(
      Array.from({ length: requests }, (_, r) =>
        s.api('POST', '/v1/messages', {
          messages: Array.from({ length: perRequest }, (_, i) => ({ conv: 'burst', seq: r * perRequest + i + 1, sender: 'bob', mentions: ['alice'] })),
        }),
      ),
    );
    expect(replies.map((r) => r.status)).toEqual(replies.map(() => 200));
    const alice = await s.unread('alice');
    expect(alice).toMatchObject({ total: requests * perRequest, mentions: LIMITS.mentionSeqsPerConversation });
    expect(alice.conversations).toEqual([
      {
        conv: 'burst',
        lastSeq: requests * perRequest,
        readSeq: 0,
        unread: requests * perRequest,
        mentions: LIMITS.mentionSeqsPerConversation,
        muted: false,
        markedUnread: false,
        category: 'default',
      },
    ]);
    // The server still answers, and a read still clears what it should.
    const last = requests * perRequest;
    expect((await s.api('POST', '/v1/users/alice/read', { conv: 'burst', seq: last - 10 })).status).toBe(200);
    expect(await s.unread('alice')).toMatchObject({ total: 10, mentions: 10 });
  });

  const NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];

  it('conversations and categories named like Object.prototype members count like any other', async () => {
    for (const name of NAMES) await s.members(name, { add: ['pat', 'quinn'], category: name });
    await s.members('big-proto', { add: ['pat', 'a1', 'a2', 'a3'], category: '__proto__' });
    for (const [i, name] of NAMES.entries()) await s.post({ conv: name, seq: i + 1, sender: 'quinn', mentions: ['pat'] });
    await s.post({ conv: 'big-proto', seq: 7, sender: 'a1' });
    const pat = await s.unread('pat');
    const expected = new Map(NAMES.map((n, i) => [n, i + 1]));
    expected.set('__proto__', (expected.get('__proto__') ?? 0) + 7);
    expect(pat.total).toBe(NAMES.reduce((n, _, i) => n + i + 1, 0) + 7);
    expect(pat.mentions).toBe(NAMES.length);
    expect(Object.entries(pat.categories).sort()).toEqual([...expected].sort());
    expect(Object.getPrototypeOf(pat.categories)).toBe(Object.prototype);
    expect(pat.conversations.map((c) => [c.conv, c.unread])).toEqual([
      ['__proto__', 1],
      ['big-proto', 7],
      ['constructor', 2],
      ['hasOwnProperty', 4],
      ['toString', 3],
      ['valueOf', 5],
    ]);
    // The user's pull: heads of the read-diffused group, named entries.
    const sync = await s.asUser<{ heads: Record<string, number>; entries: { conv: string }[] }>('pat', 'GET', '/v1/sync');
    expect(sync.status).toBe(200);
    expect(Object.entries(sync.body.heads)).toEqual([['big-proto', 7]]);
    expect(new Set(sync.body.entries.map((e) => e.conv))).toEqual(new Set([...NAMES, 'big-proto']));
  });

  it('a read-diffused group named __proto__ pushes a numeric head, and pulls carry it', async () => {
    await s.members('__proto__', { add: ['r1', 'r2', 'r3', 'r4'] });
    const c = await s.client('r1');
    const mark = c.mark();
    await s.post({ conv: '__proto__', seq: 40, sender: 'r2' });
    expect(await c.waitFrame((f) => f.t === 'head', { since: mark })).toEqual({ t: 'head', conv: '__proto__', lastSeq: 40 });
    const sync = await s.asUser<{ heads: Record<string, number> }>('r1', 'GET', '/v1/sync');
    expect(Object.entries(sync.body.heads)).toEqual([['__proto__', 40]]);
    // r1 joined at head 1 (the message of the test before).
    const r1 = await s.unread('r1');
    expect(r1.total).toBe(39);
    expect(Object.entries(r1.categories)).toEqual([['__proto__', 39]]);
  });
});
