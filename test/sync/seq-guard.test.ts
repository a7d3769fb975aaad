import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

interface ErrorBody {
  error: { code: string; message: string };
}

/**
 * Seq sanity with the settings an adopter starts with (no MAX_SEQ_JUMP set): a message id or a
 * timestamp sent as a seq is refused before it makes a badge of a trillion, the first message of
 * a conversation (head 0) included, and the error says which head, which seq and which setting.
 */
describe('seq guard by default', () => {
  const servers: TestServer[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await s.close();
  });
  const start = async (): Promise<TestServer> => {
    const s = await startTestServer();
    servers.push(s);
    await s.members('team', { add: ['ann', 'ben'] });
    return s;
  };

  it('refuses a millisecond timestamp as the first seq of a conversation (head 0), naming head, seq and MAX_SEQ_JUMP', async () => {
    const s = await start();
    const refused = await s.api<ErrorBody>('POST', '/v1/messages', { conv: 'team', seq: 1_796_520_749_000, sender: 'ben' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('seq_jump');
    expect(refused.body.error.message).toMatch(/seq 1796520749000 .* head 0\b.*MAX_SEQ_JUMP 100000/);
    expect((await s.unread('ann')).total).toBe(0);
  });

  it('refuses a jump from a live head and applies dense seqs', async () => {
    const s = await start();
    await s.post({ conv: 'team', seq: 1, sender: 'ben' });
    const refused = await s.api<ErrorBody>('POST', '/v1/messages', { conv: 'team', seq: 1_796_520_749, sender: 'ben' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.message).toMatch(/seq 1796520749 .* head 1\b.*MAX_SEQ_JUMP 100000/);
    await s.post({ conv: 'team', seq: 2, sender: 'ben' });
    expect((await s.unread('ann')).total).toBe(2);
  });
});
