import { describe, expect, it } from 'vitest';
import { durableStack } from './stack.js';

/**
 * MAX_CONVERSATIONS_PER_USER counts a user Redis lacks (cold, or lost with Redis) from what
 * PostgreSQL holds: the cap's check before a join restores the user first. Counted as new, the
 * user would pass that check with every conversation it has, the join would be applied, and
 * only the check after it would withdraw it (leaving a record behind, and a join and a leave in
 * the user's stream) instead of refusing with nothing applied.
 */
describe('durable tier: the conversation cap counts a user Redis lost', () => {
  const stack = durableStack('caprestore', [{ redisPrefix: 'cr', config: { maxConversationsPerUser: 3 }, durable: { run: false } }]);

  it('a join over the cap after FLUSHALL is refused, nothing applied', async () => {
    for (const conv of ['cr-1', 'cr-2', 'cr-3']) await stack.server.members(conv, { add: ['cr-u', `${conv}-other`] });
    await stack.server.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();

    const refused = await stack.server.api('PUT', '/v1/conversations/cr-4/members', { add: ['cr-u', 'cr-4-other'] });
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ error: { code: 'conversation_limit' } });
    // Nothing applied: no record of cr-4 for the user, and its three conversations are back.
    expect(await stack.admin.hexists('cr:{u:cr-u}:c', 'cr-4')).toBe(0);
    expect((await stack.server.unread('cr-u')).conversations.map((c) => c.conv).sort()).toEqual(['cr-1', 'cr-2', 'cr-3']);
  });
});
