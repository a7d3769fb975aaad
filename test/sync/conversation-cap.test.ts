import { afterEach, describe, expect, it } from 'vitest';
import { RedpointError } from '../../protocol/errors.js';
import type { Engine } from '../../server/engine/engine.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { createRedisEngine } from '../../server/engine/redis/redis-engine.js';
import { ConversationCap } from '../../server/sync/conversation-cap.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';

/**
 * MAX_CONVERSATIONS_PER_USER (PROTOCOL.md, PUT /v1/conversations/:conv/members): a call that
 * would put a user over the cap is refused with conversation_limit, nothing applied; a re-add
 * is never refused; calls racing past the first check withdraw their own joins, so that once
 * they have answered no user is over the cap. On both engines.
 */
const CAP = 3;
const OPTIONS = { snapshotEvery: 4, streamMaxLen: 100 };
const redis = fileFixture('redis-server', () => startRedisServer());
let prefixes = 0;
const engines: Engine[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close()));
});

const kinds: Array<[string, () => Promise<Engine>]> = [
  ['memory', async () => new MemoryEngine(OPTIONS)],
  ['redis', () => createRedisEngine({ url: redis().url, ...OPTIONS, prefix: `cap${++prefixes}` })],
];

async function convsOf(engine: Engine, uid: string): Promise<string[]> {
  return (await engine.userState(uid)).states.map((s) => s.conv).sort();
}

function refusal(err: unknown): string {
  if (!(err instanceof RedpointError)) throw err;
  expect(err.code).toBe('conversation_limit');
  return err.message;
}

for (const [kind, make] of kinds) {
  describe(`conversation cap (${kind})`, () => {
    async function service(): Promise<{ engine: Engine; sync: SyncService }> {
      const engine = await make();
      engines.push(engine);
      return { engine, sync: new SyncService(engine, { largeGroupThreshold: 2, conversationCap: new ConversationCap(engine, CAP) }) };
    }

    it('refuses the join past the cap, nothing applied; a re-add passes; a leave makes room', async () => {
      const { engine, sync } = await service();
      // c2 is read-diffused (threshold 2): its members count like any other.
      await sync.changeMembers('c1', { add: ['u', 'v'], remove: [] });
      await sync.changeMembers('c2', { add: ['u', 'v', 'w'], remove: [] });
      await sync.changeMembers('c3', { add: ['u'], remove: [] });
      const message = await sync.changeMembers('c4', { add: ['v', 'u'], remove: [] }).then(() => 'accepted', refusal);
      expect(message).toContain('user u would be in more than 3 conversations');
      expect(message).toContain('nothing was applied');
      expect(await convsOf(engine, 'u')).toEqual(['c1', 'c2', 'c3']);
      expect(await convsOf(engine, 'v')).toEqual(['c1', 'c2']);
      expect(await engine.getConversation('c4')).toBeNull();
      // Already a member: a retry of an earlier add is not refused.
      await sync.changeMembers('c3', { add: ['u', 'v'], remove: [] });
      expect(await convsOf(engine, 'v')).toEqual(['c1', 'c2', 'c3']);
      await sync.changeMembers('c1', { add: [], remove: ['u'] });
      await sync.changeMembers('c4', { add: ['u'], remove: [] });
      expect(await convsOf(engine, 'u')).toEqual(['c2', 'c3', 'c4']);
    });

    it('calls racing past the first check withdraw their joins: after they answer, nobody is over the cap', async () => {
      const { engine, sync } = await service();
      await sync.changeMembers('r1', { add: ['u', 'x'], remove: [] });
      await sync.changeMembers('r2', { add: ['u', 'x'], remove: [] });
      // u has room for one more; four calls at once each try to give it to their conversation.
      const racing = ['r3', 'r4', 'r5', 'r6'];
      const outcomes = await Promise.all(
        racing.map((conv) => sync.changeMembers(conv, { add: ['u', `${conv}-peer`], remove: [] }).then(() => 'accepted', refusal)),
      );
      const after = await convsOf(engine, 'u');
      console.log(`${kind}: racing outcomes ${JSON.stringify(outcomes)}; u in ${after.join(',')}`);
      expect(after.length).toBeLessThanOrEqual(CAP);
      racing.forEach((conv, i) => {
        const accepted = outcomes[i] === 'accepted';
        // Accepted: u joined that conversation; refused: it did not (withdrawn, or never added).
        expect(after.includes(conv), `${conv}: ${outcomes[i]}`).toBe(accepted);
      });
      // The race this test is about: calls that joined and then withdrew (the first check passed
      // for all four, since none had applied when the others checked).
      expect(outcomes.filter((o) => o.includes('withdrawn')).length).toBeGreaterThan(0);
      // Their peers stayed: the change stands for everyone else.
      for (const conv of racing) expect(await convsOf(engine, `${conv}-peer`)).toEqual([conv]);
      // One at a time, the room left is taken by the first call and refused to the next.
      const left = CAP - after.length;
      const retries = [];
      for (const conv of racing.filter((_, i) => outcomes[i] !== 'accepted')) {
        retries.push(await sync.changeMembers(conv, { add: ['u'], remove: [] }).then(() => 'accepted', refusal));
      }
      expect(retries.filter((r) => r === 'accepted').length).toBe(left);
      expect((await convsOf(engine, 'u')).length).toBe(CAP);
    });
  });
}

describe('conversation cap over HTTP', () => {
  it('PUT /v1/conversations/:conv/members answers 422 conversation_limit, naming the user', async () => {
    const { startTestServer } = await import('../helpers/test-server.js');
    const server = await startTestServer({ config: { maxConversationsPerUser: 2 } });
    try {
      await server.members('h1', { add: ['hu'] });
      await server.members('h2', { add: ['hu'] });
      const refused = await server.api<{ error: { code: string; message: string } }>('PUT', '/v1/conversations/h3/members', { add: ['hu', 'hv'] });
      expect(refused.status).toBe(422);
      expect(refused.body.error.code).toBe('conversation_limit');
      expect(refused.body.error.message).toContain('user hu would be in more than 2 conversations');
      expect((await server.unread('hv')).conversations).toEqual([]);
      expect((await server.unread('hu')).conversations.map((c) => c.conv)).toEqual(['h1', 'h2']);
    } finally {
      await server.close();
    }
  });
});
