import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../../server/app.js';
import { ApiKeys, parseApiKeys } from '../../server/auth/api-keys.js';
import { ConfigError, loadConfig } from '../../server/config.js';
import { MemoryEngine } from '../../server/engine/memory/memory-engine.js';
import { TEST_JWT_SECRET } from '../helpers/test-server.js';

/**
 * Several named API keys (REDPOINT_API_KEYS) next to the single REDPOINT_API_KEY (`default`):
 * each works, its name (never the key) shows in the request log and in a metric, and dropping a
 * key from the configuration is all a rotation takes.
 */

const OLD = 'old-key-0123456789abcdef';
const NEW = 'new-key-0123456789abcdef';
const SINGLE = 'single-key-0123456789abc';

describe('named API keys', () => {
  it('parses name:key lists (keys may hold colons) and refuses what would be ambiguous', () => {
    expect(parseApiKeys(`billing:${OLD}, chat : ${NEW}:x`)).toEqual([
      { name: 'billing', key: OLD },
      { name: 'chat', key: `${NEW}:x` },
    ]);
    const env = (keys: string, single?: string) => ({
      REDPOINT_API_KEYS: keys,
      ...(single ? { REDPOINT_API_KEY: single } : {}),
      REDPOINT_JWT_SECRET: TEST_JWT_SECRET,
    });
    expect(loadConfig(env(`a:${OLD},b:${NEW}`, SINGLE))).toMatchObject({ apiKey: SINGLE, apiKeys: [{ name: 'a' }, { name: 'b' }], devMode: false });
    const refused: Array<[string, string | undefined, RegExp]> = [
      [`a:${OLD},a:${NEW}`, undefined, /the name "a" is used twice/],
      [`default:${OLD}`, SINGLE, /"default" is used twice \(REDPOINT_API_KEY is named "default"\)/],
      [`a:${OLD},b:${OLD}`, undefined, /key "b" is the same key as another one/],
      [`a:short`, undefined, /key "a": at least 16 characters/],
      [OLD, undefined, /entry 1: expected name:key/],
      [`bad name:${OLD}`, undefined, /entry 1: the name must be/],
      [`a:${OLD},`, undefined, /entry 2/],
    ];
    for (const [keys, single, message] of refused) {
      let err: unknown;
      try {
        loadConfig(env(keys, single));
      } catch (e) {
        err = e;
      }
      expect(err, keys).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(message);
      // A key never appears in the message.
      expect((err as Error).message).not.toContain(OLD);
      expect((err as Error).message).not.toContain(NEW);
    }
  });

  it('matches every key, returning its name', () => {
    const keys = new ApiKeys([
      { name: 'a', key: OLD },
      { name: 'b', key: NEW },
    ]);
    expect([keys.match(OLD), keys.match(NEW), keys.match(SINGLE), keys.match(''), keys.match(OLD.slice(0, -1))]).toEqual(['a', 'b', null, null, null]);
  });

  describe('on a server', () => {
    let server: RunningServer;
    const lines: Array<Record<string, unknown>> = [];
    beforeAll(async () => {
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
          done();
        },
      });
      const config = {
        ...loadConfig({ REDPOINT_API_KEY: SINGLE, REDPOINT_API_KEYS: `chat-2025:${OLD},chat-2026:${NEW}`, REDPOINT_JWT_SECRET: TEST_JWT_SECRET }),
        host: '127.0.0.1',
        port: 0,
      };
      server = await startServer(config, pino({ level: 'debug' }, sink), new MemoryEngine({ snapshotEvery: 5, streamMaxLen: 10 }));
    });
    afterAll(async () => {
      await server?.close();
    });

    const call = async (key: string, requestId: string) => {
      const res = await fetch(`http://127.0.0.1:${server.port}/v1/conversations/team/members`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': requestId },
        body: JSON.stringify({ add: ['alice'] }),
      });
      return res.status;
    };

    it('accepts each key; the request log names the key, never shows it; a metric counts by name', async () => {
      expect(await call(OLD, 'req-old')).toBe(200);
      expect(await call(NEW, 'req-new')).toBe(200);
      expect(await call(SINGLE, 'req-single')).toBe(200);
      expect(await call('wrong-key-0123456789abc', 'req-wrong')).toBe(401);
      const logged = (id: string) => lines.find((l) => l.msg === 'request' && l.requestId === id);
      expect(logged('req-old')).toMatchObject({ apiKey: 'chat-2025', status: 200 });
      expect(logged('req-new')).toMatchObject({ apiKey: 'chat-2026', status: 200 });
      expect(logged('req-single')).toMatchObject({ apiKey: 'default', status: 200 });
      expect(logged('req-wrong')).toMatchObject({ status: 401 });
      expect(logged('req-wrong')).not.toHaveProperty('apiKey');
      const all = JSON.stringify(lines);
      for (const key of [OLD, NEW, SINGLE]) expect(all).not.toContain(key);
      const metrics = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
      expect(metrics).toMatch(/redpoint_api_key_requests_total\{key="chat-2025"\} 1/);
      expect(metrics).toMatch(/redpoint_api_key_requests_total\{key="chat-2026"\} 1/);
      expect(metrics).toMatch(/redpoint_api_key_requests_total\{key="default"\} 1/);
    });
  });

  it('rotation: a server configured without the old key refuses it, and the new one goes on working', async () => {
    const config = { ...loadConfig({ REDPOINT_API_KEYS: `chat-2026:${NEW}`, REDPOINT_JWT_SECRET: TEST_JWT_SECRET }), host: '127.0.0.1', port: 0 };
    expect(config.apiKey).toBeUndefined();
    const server = await startServer(config, pino({ level: 'silent' }), new MemoryEngine({ snapshotEvery: 5, streamMaxLen: 10 }));
    try {
      const status = async (key: string) =>
        (await fetch(`http://127.0.0.1:${server.port}/v1/users/alice/unread`, { headers: { authorization: `Bearer ${key}` } })).status;
      expect(await status(NEW)).toBe(200);
      expect(await status(OLD)).toBe(401);
    } finally {
      await server.close();
    }
  });
});
