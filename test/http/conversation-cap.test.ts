import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpTarget } from '../../bench/lib/http.js';
import type { UnreadSummary } from '../../protocol/types.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { TEST_API_KEY } from '../helpers/test-server.js';

/**
 * MAX_CONVERSATIONS_PER_USER across processes (issue 45): two real server processes on one
 * Redis (the first with two worker threads), many joins of one user at once, spread over them.
 * The cap is decided atomically on the user before the join (the claim, sync/conversation-cap.ts),
 * so exactly the cap's worth of joins is admitted, every 422 names the user and leaves them out
 * of that conversation alone, and a 422 is answered again while the user is at the cap, and not
 * after a leave.
 */
const CAP = 20;
const JOINS = 60;

describe('the conversation cap across two server processes', () => {
  let redis: RedisServer;
  const servers: ServerProcess[] = [];
  const http: HttpTarget[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    for (const workers of ['2', '1']) {
      const server = await spawnServer({ REDIS_URL: redis.url, MAX_CONVERSATIONS_PER_USER: String(CAP), WORKERS: workers });
      servers.push(server);
      http.push(new HttpTarget(server.port, { authorization: `Bearer ${TEST_API_KEY}` }, 64, 30_000));
    }
  }, 120_000);

  afterAll(async () => {
    for (const h of http) h.close();
    for (const s of servers) await s.stop();
    await redis?.stop();
  });

  const put = (via: number, conv: string, body: { add?: string[]; remove?: string[] }) =>
    (http[via % 2] as HttpTarget).send('PUT', `/v1/conversations/${conv}/members`, { add: [], remove: [], ...body });
  const convsOf = async (uid: string): Promise<string[]> => {
    const reply = await (http[0] as HttpTarget).send('GET', `/v1/users/${uid}/unread`);
    expect(reply.status).toBe(200);
    return (JSON.parse(reply.body) as UnreadSummary).conversations.map((c) => c.conv).sort();
  };

  it(`${JOINS} concurrent joins at cap ${CAP}: exactly ${CAP} admitted, each 422 for that join alone, retries true to the contract`, async () => {
    const convs = Array.from({ length: JOINS }, (_, i) => `capA-r${i}`);
    const replies = await Promise.all(convs.map((conv, i) => put(i, conv, { add: ['capA', `other${i}`] })));
    const statuses = replies.map((r) => r.status);
    const admitted = convs.filter((_, i) => statuses[i] === 200);
    const refused = convs.filter((_, i) => statuses[i] === 422);
    expect(admitted.length + refused.length, `statuses ${JSON.stringify(statuses)}`).toBe(JOINS);
    expect(admitted.length).toBe(CAP);
    expect(await convsOf('capA')).toEqual([...admitted].sort());
    for (const [i, reply] of replies.entries()) {
      if (reply.status !== 422) continue;
      const error = (JSON.parse(reply.body) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe('conversation_limit');
      expect(error.message).toContain(`user capA would be in more than ${CAP} conversations`);
      // The rest of the call stands: the other user joined.
      expect(await convsOf(`other${i}`)).toEqual([convs[i]]);
    }
    // A retry while the user is at the cap: the same answer, nothing added.
    const again = await Promise.all(refused.slice(0, 5).map((conv, i) => put(i, conv, { add: ['capA'] })));
    expect(again.map((r) => r.status)).toEqual(Array(5).fill(422));
    // A retry of an admitted join: still 200 (a current member is never refused).
    expect((await put(1, admitted[0] as string, { add: ['capA'] })).status).toBe(200);
    expect((await convsOf('capA')).length).toBe(CAP);
    // A leave makes room for exactly one: of racing retries, one is admitted.
    expect((await put(0, admitted[1] as string, { remove: ['capA'] })).status).toBe(200);
    const retries = await Promise.all(refused.slice(0, 6).map((conv, i) => put(i, conv, { add: ['capA'] })));
    expect(retries.filter((r) => r.status === 200).length).toBe(1);
    expect(retries.filter((r) => r.status === 422).length).toBe(5);
    expect((await convsOf('capA')).length).toBe(CAP);
  }, 120_000);
});
