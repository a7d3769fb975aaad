import { describe, expect, it } from 'vitest';
import { durableStack } from './stack.js';

/**
 * MAX_CONVERSATIONS_PER_USER counts a user Redis lacks (cold, or lost with Redis) from what
 * PostgreSQL holds: the join's claim restores the user first (Engine.claimJoins). Counted as new,
 * the user would be claimed a place with every conversation it already has, and the join applied
 * over the cap.
 */
describe('durable tier: the conversation cap counts a user Redis lost', () => {
  const options = { config: { maxConversationsPerUser: 3 }, durable: { run: false } };
  const stack = durableStack('caprestore', [
    { redisPrefix: 'cr', ...options },
    { redisPrefix: 'cr', ...options },
  ]);

  it('a join over the cap after FLUSHALL is refused, the user not added', async () => {
    for (const conv of ['cr-1', 'cr-2', 'cr-3']) await stack.server.members(conv, { add: ['cr-u', `${conv}-other`] });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();

    const refused = await stack.server.api('PUT', '/v1/conversations/cr-4/members', { add: ['cr-u', 'cr-4-other'] });
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ error: { code: 'conversation_limit' } });
    // Not added: no record of cr-4 for the user, and its three conversations are back.
    expect(await stack.admin.hexists('cr:{u:cr-u}:c', 'cr-4')).toBe(0);
    expect((await stack.server.unread('cr-u')).conversations.map((c) => c.conv).sort()).toEqual(['cr-1', 'cr-2', 'cr-3']);
  });

  it('racing joins of a user Redis lost, through two servers, admit exactly the room PostgreSQL leaves it', async () => {
    for (const conv of ['cw-1', 'cw-2']) await stack.server.members(conv, { add: ['cw-u'] });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();

    const racing = ['cw-3', 'cw-4', 'cw-5', 'cw-6', 'cw-7', 'cw-8'];
    const replies = await Promise.all(
      racing.map((conv, i) => stack.servers[i % 2]?.api('PUT', `/v1/conversations/${conv}/members`, { add: ['cw-u', `${conv}-other`] })),
    );
    const admitted = racing.filter((_, i) => replies[i]?.status === 200);
    expect(replies.filter((r) => r?.status === 422).length).toBe(racing.length - 1);
    expect(admitted.length).toBe(1);
    expect((await stack.server.unread('cw-u')).conversations.map((c) => c.conv).sort()).toEqual(['cw-1', 'cw-2', ...admitted]);
  });
});
