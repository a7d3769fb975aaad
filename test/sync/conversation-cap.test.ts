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
 * MAX_CONVERSATIONS_PER_USER (PROTOCOL.md, PUT /v1/conversations/:conv/members): a user the call
 * would put over the cap is left out, and the call answers conversation_limit naming them; the
 * rest of the call stands (and when nothing else was asked, nothing at all is applied). A re-add
 * is never refused, a retry gets the same answer while the user is at the cap, and racing calls
 * admit exactly the room left. On both engines.
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
    async function service(holdMs?: number): Promise<{ engine: Engine; sync: SyncService }> {
      const engine = await make();
      engines.push(engine);
      return { engine, sync: new SyncService(engine, { largeGroupThreshold: 2, conversationCap: new ConversationCap(engine, CAP, holdMs) }) };
    }
    const attempt = (sync: SyncService, conv: string, add: string[], remove: string[] = []): Promise<string> =>
      sync.changeMembers(conv, { add, remove }).then(() => 'accepted', refusal);

    it('leaves the user at the cap out, the rest applied; a retry answers the same; a leave makes room', async () => {
      const { engine, sync } = await service();
      // c2 is read-diffused (threshold 2): its members count like any other.
      await sync.changeMembers('c1', { add: ['u', 'v'], remove: [] });
      await sync.changeMembers('c2', { add: ['u', 'v', 'w'], remove: [] });
      await sync.changeMembers('c3', { add: ['u'], remove: [] });
      const message = await attempt(sync, 'c4', ['v', 'u']);
      expect(message).toContain('user u would be in more than 3 conversations (MAX_CONVERSATIONS_PER_USER) and was not added');
      expect(message).toContain('the rest of the change was applied');
      expect(await convsOf(engine, 'u')).toEqual(['c1', 'c2', 'c3']);
      expect(await convsOf(engine, 'v')).toEqual(['c1', 'c2', 'c4']);
      // The same call again: the same answer, v not added twice.
      expect(await attempt(sync, 'c4', ['v', 'u'])).toBe(message);
      expect((await engine.getConversation('c4'))?.memberCount).toBe(1);
      // Nothing but the refused user asked: nothing applied, not even the conversation made.
      expect(await attempt(sync, 'c5', ['u'])).toContain('nothing was applied');
      expect(await engine.getConversation('c5')).toBeNull();
      // Already a member, at the cap: a retry of an earlier add is not refused.
      expect(await attempt(sync, 'c3', ['u'])).toBe('accepted');
      await sync.changeMembers('c1', { add: [], remove: ['u'] });
      expect(await attempt(sync, 'c4', ['v', 'u'])).toBe('accepted');
      expect(await convsOf(engine, 'u')).toEqual(['c2', 'c3', 'c4']);
    });

    it('racing calls admit exactly the room left; each refused one leaves only that user out', async () => {
      const { engine, sync } = await service();
      await sync.changeMembers('r1', { add: ['u', 'x'], remove: [] });
      // u has room for two; six calls at once each try to give it to their conversation.
      const racing = ['r2', 'r3', 'r4', 'r5', 'r6', 'r7'];
      const outcomes = await Promise.all(racing.map((conv) => attempt(sync, conv, ['u', `${conv}-peer`])));
      const after = await convsOf(engine, 'u');
      expect(after.length).toBe(CAP);
      expect(outcomes.filter((o) => o === 'accepted').length).toBe(CAP - 1);
      racing.forEach((conv, i) => {
        expect(after.includes(conv), `${conv}: ${outcomes[i]}`).toBe(outcomes[i] === 'accepted');
      });
      // Their peers joined all the same.
      for (const conv of racing) expect(await convsOf(engine, `${conv}-peer`)).toEqual([conv]);
      // Every refusal is true while u is at the cap: retried, refused again.
      for (const conv of racing.filter((_, i) => outcomes[i] !== 'accepted')) expect(await attempt(sync, conv, ['u'])).toContain('not added');
      expect((await convsOf(engine, 'u')).length).toBe(CAP);
    });

    it('a join claimed by a call that failed before adding holds the place until its hold lapses, or the call is retried', async () => {
      const { engine, sync } = await service(1_500);
      const cap = new ConversationCap(engine, CAP, 1_500);
      await sync.changeMembers('h1', { add: ['u'], remove: [] });
      await sync.changeMembers('h2', { add: ['u'], remove: [] });
      // A call that claimed u's join to h3 and then failed (its process died).
      expect(await cap.claim('h3', ['u'])).toEqual({ admitted: ['u'], full: [] });
      expect(await attempt(sync, 'h4', ['u'])).toContain('not added');
      // Its retry takes its own claim.
      expect(await attempt(sync, 'h3', ['u'])).toBe('accepted');
      await sync.changeMembers('h3', { add: [], remove: ['u'] });
      // Claimed again and never retried: the place comes back after the hold.
      await cap.claim('h5', ['u']);
      expect(await attempt(sync, 'h4', ['u'])).toContain('not added');
      await new Promise((resolve) => setTimeout(resolve, 1_600));
      expect(await attempt(sync, 'h4', ['u'])).toBe('accepted');
    });

    it('a retry of a call that died after its conversation step finishes the join, even once its claim lapsed and the user filled up', async () => {
      const { engine, sync } = await service(1_500);
      const cap = new ConversationCap(engine, CAP, 1_500);
      await sync.changeMembers('k1', { add: ['u'], remove: [] });
      await sync.changeMembers('k2', { add: ['u'], remove: [] });
      // A call claimed u's join to k3, made the conversation step, and died before u's user step.
      await cap.claim('k3', ['u']);
      await engine.changeMembers('k3', { add: ['u'], remove: [], threshold: 2 });
      await new Promise((resolve) => setTimeout(resolve, 1_600));
      expect(await attempt(sync, 'k4', ['u'])).toBe('accepted');
      // k3 lists u: u is a member there, and a re-add is never refused; the retry finishes the
      // join (a 422 saying u was not added would leave u on k3's roster without a record).
      expect(await attempt(sync, 'k3', ['u'])).toBe('accepted');
      expect(await convsOf(engine, 'u')).toEqual(['k1', 'k2', 'k3', 'k4']);
      expect((await engine.roster('k3'))?.members.map((m) => m.uid)).toEqual(['u']);
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
      // The rest of the call stands.
      expect((await server.unread('hv')).conversations.map((c) => c.conv)).toEqual(['h3']);
      expect((await server.unread('hu')).conversations.map((c) => c.conv)).toEqual(['h1', 'h2']);
    } finally {
      await server.close();
    }
  });
});
