import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ErrorFrame } from '../../protocol/frames.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import type { WsClient } from '../helpers/ws-client.js';
import { expectMatchesServer } from '../helpers/ws-expect.js';

/**
 * A request frame that parses and carries a usable id gets its error with that id, whatever else
 * is wrong with it (PROTOCOL.md "One reply per request"), and never counts toward the 4004 close:
 * a client waiting on that id must not hang until its own timeout.
 */
let server: TestServer;
const alice = 'alice';
const dm = 'dm-alice-bob';

beforeAll(async () => {
  server = await startTestServer();
  await server.members(dm, { add: [alice, 'bob'] });
  await server.post({ conv: dm, seq: 3, sender: 'bob' });
});
afterAll(async () => {
  await server?.close();
});

/** Sends `text` as is and waits for the error frame carrying `id`. */
async function errorFor(c: WsClient, id: number, text: string | Uint8Array, binary = false): Promise<ErrorFrame> {
  const m = c.mark();
  c.sendRaw(text, binary);
  return (await c.waitFrame((f) => f.t === 'error' && f.id === id, { since: m, label: `error #${id}` })) as ErrorFrame;
}

describe('invalid request frames keep their id', () => {
  it('read, pull and settings with bad values: one error each, with the id, the socket kept open', async () => {
    const c = await server.client(alice);
    const before = await server.position(alice);
    const cases: Array<[number, string]> = [
      [101, '{"t":"read","id":101,"reads":[["dm-alice-bob",1.5]]}'],
      [102, `{"t":"read","id":102,"reads":[["dm-alice-bob",${2 ** 48 + 1}]]}`],
      [103, '{"t":"read","id":103,"reads":[["dm-alice-bob",1e400]]}'],
      [104, '{"t":"pull","id":104,"limit":1e400}'],
      [105, '{"t":"pull","id":105,"limit":0}'],
      [106, '{"t":"settings","id":106,"conv":"dm-alice-bob","muted":"yes"}'],
      [107, '{"t":"settings","id":107,"conv":"dm-alice-bob"}'],
      [108, '{"t":"settings","id":108,"conv":"not a valid id","muted":true}'],
      [109, '{"t":"read","id":109,"reads":[["dm-alice-bob",1]],"extra":1}'],
    ];
    for (const [id, text] of cases) {
      const err = await errorFor(c, id, text);
      expect(err.code, text).toBe('invalid_request');
    }
    // Each got exactly one reply.
    const errors = c.framesOf('error');
    for (const [id] of cases) expect(errors.filter((e) => e.id === id).length).toBe(1);
    expect(c.isOpen).toBe(true);
    expect(await server.position(alice)).toEqual(before);
    await c.sync();
    await expectMatchesServer(c, server, 'after invalid frames');
    await c.close();
  });

  it('MessagePack frames too', async () => {
    const { encodeMsgpack } = await import('../../protocol/codec.js');
    const c = await server.client(alice, { binary: true });
    const err = await errorFor(c, 7, encodeMsgpack({ t: 'read', id: 7, reads: [[dm, 2 ** 48 + 1]] }), true);
    expect(err.code).toBe('invalid_request');
    expect(c.isOpen).toBe(true);
    await c.close();
  });

  it('many invalid frames with ids never close the socket 4004; frames without a usable id still do', async () => {
    const c = await server.client(alice);
    for (let i = 0; i < 25; i++) await errorFor(c, 1000 + i, `{"t":"read","id":${1000 + i},"reads":[["dm-alice-bob",-5]]}`);
    expect(c.isOpen).toBe(true);
    const ack = await c.read([[dm, 1]]);
    expect(ack.t).toBe('ack');
    // An id that is not a usable request id (negative, fractional, a string) is no id at all.
    for (const bad of ['-1', '1.5', '"x"', '1e400']) c.sendRaw(`{"t":"pull","id":${bad}}`, false);
    await c.waitFor(() => c.framesOf('error').filter((e) => e.id === undefined).length === 4, 5000, 'four errors without id');
    for (let i = 0; i < 6; i++) c.sendRaw('not json', false);
    expect((await c.waitClose()).code).toBe(4004);
  });

  it('an unknown frame type with an id gets its error with the id', async () => {
    const c = await server.client(alice);
    const err = await errorFor(c, 55, '{"t":"subscribe","id":55,"conv":"x"}');
    expect(err.code).toBe('invalid_request');
    expect(err.message).toMatch(/unknown frame type/);
    await c.close();
  });
});
