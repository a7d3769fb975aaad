import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../protocol/limits.js';
import type { ConvView, MessageEvent } from '../../protocol/types.js';
import { serversPerTest } from '../helpers/servers-per-test.js';
import type { TestServer } from '../helpers/test-server.js';

/**
 * Topics (PROTOCOL.md "Topics") through the HTTP API on both engines: a topic's rows sum into the
 * badge, reads are per row, the conversation's membership reaches its topics, the topic cap, and
 * user operations on a topic refused as on a conversation. The interleavings of a topic's first
 * message with a membership change are test/sync/interleavings.ts's.
 */
describe.each(['memory', 'redis'] as const)('topics (%s)', (engine) => {
  const startServer = serversPerTest(engine);
  const start = async (): Promise<TestServer> => {
    const s = await startServer();
    await s.members('team', { add: ['alice', 'bob'] });
    return s;
  };
  const msg = (seq: number, topic?: string, mentions?: string[]): MessageEvent => ({
    conv: 'team',
    seq,
    sender: 'bob',
    ...(topic !== undefined ? { topic } : {}),
    ...(mentions ? { mentions } : {}),
  });
  const rows = async (s: TestServer, uid: string): Promise<Map<string, ConvView>> => new Map((await s.unread(uid)).conversations.map((c) => [c.conv, c]));
  const path = (conv: string): string => encodeURIComponent(conv);

  it("a topic's counts sum into the badge: each topic has its own seqs and its own row, with parent and topic", async () => {
    const s = await start();
    await s.post([msg(1), msg(2), msg(1, 'design', ['alice']), msg(2, 'design'), msg(3, 'design'), msg(1, 'ops')]);
    const alice = await s.unread('alice');
    expect(alice).toMatchObject({ total: 6, mentions: 1, categories: { default: 6 } });
    const byConv = await rows(s, 'alice');
    expect(byConv.get('team')).toMatchObject({ lastSeq: 2, unread: 2 });
    expect(byConv.get('team')).not.toHaveProperty('parent');
    expect(byConv.get('team#t:design')).toMatchObject({ parent: 'team', topic: 'design', lastSeq: 3, unread: 3, mentions: 1 });
    expect(byConv.get('team#t:ops')).toMatchObject({ parent: 'team', topic: 'ops', lastSeq: 1, unread: 1 });
    // The sender has read their own messages, in every topic.
    expect(await s.unread('bob')).toMatchObject({ total: 0 });
    // The pull carries the same rows.
    const pulled = await s.asUser<{ snapshot?: { convs: Array<{ conv: string; parent?: string; topic?: string }> } }>('alice', 'GET', '/v1/sync');
    expect(pulled.status).toBe(200);
    expect(pulled.body.snapshot?.convs.find((c) => c.conv === 'team#t:ops')).toMatchObject({ parent: 'team', topic: 'ops' });
  });

  it("reading one topic leaves the other topics' and the conversation's counts alone", async () => {
    const s = await start();
    await s.post([msg(1), msg(1, 'design', ['alice']), msg(2, 'design'), msg(1, 'ops', ['alice'])]);
    await s.ok('POST', '/v1/users/alice/read', { conv: 'team#t:design', seq: 2 });
    const byConv = await rows(s, 'alice');
    expect(byConv.get('team#t:design')).toMatchObject({ readSeq: 2, unread: 0, mentions: 0 });
    expect(byConv.get('team#t:ops')).toMatchObject({ readSeq: 0, unread: 1, mentions: 1 });
    expect(byConv.get('team')).toMatchObject({ readSeq: 0, unread: 1 });
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 1 });
    // Settings and "unread from here" name a topic in the path (`#` as %23), per row too.
    await s.ok('PUT', `/v1/users/alice/conversations/${path('team#t:ops')}`, { level: 'none' });
    await s.ok('POST', `/v1/users/alice/conversations/${path('team#t:design')}/unread-from`, { seq: 2 });
    expect(await s.unread('alice')).toMatchObject({ total: 2, mentions: 0 });
    expect((await rows(s, 'alice')).get('team#t:ops')).toMatchObject({ muted: true, unread: 1 });
  });

  it('a join of the conversation reaches its existing topics; a leave removes them', async () => {
    const s = await start();
    await s.post([msg(1, 'design'), msg(1, 'ops')]);
    await s.members('team', { add: ['carol'] });
    await s.post([msg(2, 'design', ['carol'])]);
    const carol = await rows(s, 'carol');
    // Joined at each topic's head then: what came before is not hers to read.
    expect(carol.get('team#t:design')).toMatchObject({ lastSeq: 2, readSeq: 1, unread: 1, mentions: 1 });
    expect(carol.get('team#t:ops')).toMatchObject({ lastSeq: 1, readSeq: 1, unread: 0 });
    expect(await s.unread('carol')).toMatchObject({ total: 1, mentions: 1 });
    await s.members('team', { remove: ['carol'] });
    expect((await s.unread('carol')).conversations).toEqual([]);
    await s.post([msg(3, 'design', ['carol'])]);
    expect(await s.unread('carol')).toMatchObject({ total: 0, conversations: [] });
    // A category change reaches them too.
    await s.members('team', { category: 'work' });
    expect((await rows(s, 'alice')).get('team#t:ops')).toMatchObject({ category: 'work' });
  });

  it(`the topic beyond ${LIMITS.topicsPerConversation} is refused with limit_exceeded and changes nothing`, async () => {
    const s = await start();
    const topics = Array.from({ length: LIMITS.topicsPerConversation }, (_, i) => msg(1, `t${i}`));
    for (let i = 0; i < topics.length; i += 25) await s.post(topics.slice(i, i + 25));
    const before = await s.unread('alice');
    expect(before.total).toBe(LIMITS.topicsPerConversation);
    const refused = await s.api<{ error: { code: string; message: string } }>('POST', '/v1/messages', { messages: [msg(2, 't0'), msg(1, 'one-too-many')] });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('limit_exceeded');
    expect(refused.body.error.message).toContain('one-too-many');
    expect(await s.unread('alice')).toEqual(before);
    expect(await s.engine.topics('team')).not.toContain('one-too-many');
    // An existing topic still takes messages.
    await s.post(msg(2, 't0'));
    expect((await s.unread('alice')).total).toBe(LIMITS.topicsPerConversation + 1);
  });

  it("a user operation on another user's or an unknown topic is refused as on a conversation", async () => {
    const s = await start();
    await s.members('secret', { add: ['bob'] });
    await s.post([{ conv: 'secret', topic: 'x', seq: 1, sender: 'bob' }, msg(1, 'design')]);
    const read = (conv: string) => s.api<{ error: { code: string } }>('POST', '/v1/users/alice/read', { conv, seq: 1 });
    expect(await read('secret#t:x')).toMatchObject({ status: 403, body: { error: { code: 'not_a_member' } } });
    expect(await read('team#t:nope')).toMatchObject({ status: 404, body: { error: { code: 'unknown_conversation' } } });
    expect(await read('nope#t:x')).toMatchObject({ status: 404, body: { error: { code: 'unknown_conversation' } } });
    const settings = await s.api('PUT', `/v1/users/alice/conversations/${path('team#t:nope')}`, { muted: true });
    expect(settings.status).toBe(404);
    expect((await s.api('DELETE', `/v1/users/alice/conversations/${path('secret#t:x')}`)).status).toBe(403);
    // A topic message to an unknown conversation is refused like any message to it.
    const lost = await s.api<{ error: { code: string } }>('POST', '/v1/messages', { conv: 'nope', topic: 'x', seq: 1, sender: 'bob' });
    expect(lost).toMatchObject({ status: 404, body: { error: { code: 'unknown_conversation' } } });
    // Child ids are for user operations: the message service's members endpoint and a message's conv refuse them.
    expect((await s.api('PUT', `/v1/conversations/${path('team#t:design')}/members`, { add: ['x'] })).status).toBe(400);
    expect((await s.api('POST', '/v1/messages', { conv: 'team#t:design', seq: 2, sender: 'bob' })).status).toBe(400);
    expect(await s.unread('alice')).toMatchObject({ total: 1 });
  });

  it("over the WebSocket: a read frame names a topic, and the change frame carries the topic's row", async () => {
    const s = await start();
    await s.post([msg(1, 'design', ['alice']), msg(2, 'design')]);
    const phone = await s.client('alice');
    await phone.sync();
    const mark = phone.mark();
    expect(await phone.request({ t: 'read', reads: [['team#t:design', 1]] })).toMatchObject({ t: 'ack' });
    const change = await phone.waitFrame((f) => f.t === 'change' && f.conv === 'team#t:design', { since: mark, label: 'the read' });
    expect(change).toMatchObject({ state: { conv: 'team#t:design', parent: 'team', topic: 'design', readSeq: 1, mentions: 0 } });
    expect(await phone.request({ t: 'settings', conv: 'team#t:design', level: 'mentions' })).toMatchObject({ t: 'ack' });
    expect((await rows(s, 'alice')).get('team#t:design')).toMatchObject({ level: 'mentions', unread: 1 });
    expect(await s.unread('alice')).toMatchObject({ total: 0 });
  });

  it('each topic row counts toward MAX_CONVERSATIONS_PER_USER: topics are never refused, a new conversation then is', async () => {
    const s = await startServer({ config: { maxConversationsPerUser: 3 } });
    await s.members('team', { add: ['alice', 'bob'] });
    await s.post([msg(1, 'a'), msg(1, 'b'), msg(1, 'c')]);
    expect((await s.unread('alice')).conversations).toHaveLength(4);
    const refused = await s.api<{ error: { code: string } }>('PUT', '/v1/conversations/other/members', { add: ['alice'] });
    expect(refused).toMatchObject({ status: 422, body: { error: { code: 'conversation_limit' } } });
  });

  it("the operator's delete of a conversation deletes its topics and their registry; a conversation re-created under the id starts without them", async () => {
    const s = await start();
    await s.post([msg(1), msg(1, 'design'), msg(2, 'design'), msg(1, 'ops')]);
    expect((await s.api('DELETE', '/v1/conversations/team')).status).toBe(200);
    expect(await s.unread('alice')).toMatchObject({ total: 0, conversations: [] });
    expect(await s.engine.topics('team')).toEqual([]);
    expect(await s.engine.missingConversations(['team#t:design', 'team#t:ops'])).toEqual(['team#t:design', 'team#t:ops']);
    await s.members('team', { add: ['alice', 'bob'] });
    // Seqs go on past the deleted ones, as for any conversation re-created under its id.
    await s.post(msg(3, 'design'));
    expect(await s.engine.topics('team')).toEqual(['design']);
    expect((await rows(s, 'alice')).get('team#t:design')).toMatchObject({ lastSeq: 3, unread: 1 });
    expect((await s.unread('alice')).total).toBe(1);
  });
});
