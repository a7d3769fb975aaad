import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerRoutes as registerDemoPage } from '../../client-demo/page-routes.js';
import { DEV_API_KEY, DEV_JWT_SECRET } from '../../server/config.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * The demo's shared record (client-demo/demo-activity.ts) over HTTP on a real dev-mode server:
 * a sent message's own time stamps its seq whichever report comes first (the page's "seen it"
 * and the tools' "sent it" race), a plain report only stamps a higher seq, bad input changes nothing.
 */
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ config: { devMode: true, apiKey: DEV_API_KEY, jwtSecret: DEV_JWT_SECRET }, routes: registerDemoPage });
});
afterAll(async () => {
  await server?.close();
});

interface Record {
  activity: { [conv: string]: number };
  messages: { [conv: string]: Array<{ seq: number; sender: string; text: string; mention: boolean; at: number; kind?: string; recalls?: number }> };
}

async function report(body: unknown): Promise<{ status: number; record: Record }> {
  const res = await fetch(`${server.url}/demo/activity`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, record: (await res.json()) as Record };
}
const current = async (): Promise<Record> => (await (await fetch(`${server.url}/demo/activity`)).json()) as Record;
const HOUR = 3_600_000;
const sent = (seq: number, agoMs: number) => ({ seq, sender: 'carol', text: `line ${seq}`, mention: seq === 2, agoMs });

describe('the demo activity record', () => {
  it("a sent message's own time wins over a device's 'seen now', in either order", async () => {
    // Seen first, then reported as sent an hour ago.
    await report({ conv: 'seen-first', seq: 2 });
    const before = Date.now();
    const { record } = await report({ conv: 'seen-first', seq: 2, messages: [sent(1, HOUR + 60_000), sent(2, HOUR)] });
    expect(record.activity['seen-first']).toBeLessThanOrEqual(before - HOUR + 1000);
    expect(record.messages['seen-first']?.map((m) => [m.seq, m.text, m.mention])).toEqual([
      [1, 'line 1', false],
      [2, 'line 2', true],
    ]);
    // Sent first, then a device sees the same seq: nothing moves.
    await report({ conv: 'sent-first', seq: 1, messages: [sent(1, HOUR)] });
    const stamped = (await current()).activity['sent-first'];
    await report({ conv: 'sent-first', seq: 1 });
    expect((await current()).activity['sent-first']).toBe(stamped);
    // A newer message seen stamps now.
    const { record: after } = await report({ conv: 'sent-first', seq: 2 });
    expect(after.activity['sent-first']).toBeGreaterThanOrEqual(before);
  });

  it("keeps a topic's messages under its row's id, apart from its conversation's (each topic numbers its own seqs)", async () => {
    await report({ conv: 'forum', seq: 1, messages: [sent(1, HOUR)] });
    const { status, record } = await report({ conv: 'forum#t:design', seq: 1, messages: [{ ...sent(1, 0), text: 'in design' }] });
    expect(status).toBe(200);
    expect(record.messages['forum#t:design']?.map((m) => m.text)).toEqual(['in design']);
    expect(record.messages.forum?.map((m) => m.text)).toEqual(['line 1']);
    // Still no other form of id: a topic's id is `<conv>#t:<topic>`.
    expect((await report({ conv: 'forum#x', seq: 1 })).status).toBe(400);
  });

  it('keeps the last 20 sent messages of a conversation', async () => {
    for (let seq = 1; seq <= 25; seq++) await report({ conv: 'long', seq, messages: [sent(seq, 0)] });
    expect((await current()).messages.long?.map((m) => m.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 6));
  });

  it('a sent message past the seq reported is refused and changes nothing', async () => {
    const before = await current();
    const { status } = await report({ conv: 'bad', seq: 1, messages: [sent(3, 0)] });
    expect(status).toBe(400);
    expect(await current()).toEqual(before);
  });

  it('keeps what each message was sent as (issue 43): a reaction, an @all, a recall naming the seq it recalls', async () => {
    const messages = [
      { ...sent(1, 0), kind: 'all' },
      { ...sent(2, 0), kind: 'reaction', text: '👍' },
      { ...sent(3, 0), kind: 'recall', recalls: 1, text: '' },
    ];
    const { status, record } = await report({ conv: 'kinds', seq: 3, messages });
    expect(status).toBe(200);
    expect(record.messages.kinds?.map(({ seq, kind, recalls }) => ({ seq, kind, recalls }))).toEqual([
      { seq: 1, kind: 'all', recalls: undefined },
      { seq: 2, kind: 'reaction', recalls: undefined },
      { seq: 3, kind: 'recall', recalls: 1 },
    ]);
  });

  it('a recall without the seq it recalls, a recalled seq not before the recall, or recalls on another kind is refused', async () => {
    const before = await current();
    for (const bad of [
      { ...sent(2, 0), kind: 'recall' },
      { ...sent(2, 0), kind: 'recall', recalls: 2 },
      { ...sent(2, 0), recalls: 1 },
      { ...sent(2, 0), kind: 'reaction', recalls: 1 },
      { ...sent(2, 0), kind: 'edit' },
    ]) {
      const { status } = await report({ conv: 'bad-kinds', seq: 2, messages: [bad] });
      expect(status, JSON.stringify(bad)).toBe(400);
    }
    expect(await current()).toEqual(before);
  });
});
