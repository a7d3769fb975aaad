import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../bench/lib/child-server.js';
import { fileFixture } from '../helpers/file-fixture.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, TEST_API_KEY, type TestServer } from '../helpers/test-server.js';
import { setCounter } from '../helpers/user-meta.js';

const run = promisify(execFile);

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** `npx redpoint ...` as an operator runs it (bin/redpoint.mjs), with only the variables given. */
async function redpoint(args: string[], env: Record<string, string>): Promise<CliResult> {
  const base: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' };
  try {
    const { stdout, stderr } = await run(process.execPath, ['bin/redpoint.mjs', ...args], { cwd: PROJECT_ROOT, env: { ...base, ...env }, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

async function workload(server: TestServer): Promise<void> {
  await server.members('team', { add: ['ann', 'ben', 'cat'], category: 'group' });
  await server.members('big', { add: ['ann', 'ben', 'cat', 'dan', 'eve'] });
  await server.post([
    { conv: 'team', seq: 1, sender: 'ben', mentions: ['ann'] },
    { conv: 'team', seq: 2, sender: 'cat' },
    { conv: 'big', seq: 1, sender: 'dan' },
  ]);
  await server.ok('POST', '/v1/users/ann/read', { conv: 'team', seq: 1 });
}

describe('the redpoint CLI on a Redis store (REDIS_URL)', () => {
  const redis = fileFixture('redis-server', () => startRedisServer());
  let server: TestServer;
  let env: Record<string, string>;

  beforeAll(async () => {
    // The CLI uses the production key prefix, as a deployment's processes do.
    server = await startTestServer({ engine: 'redis', redis: redis(), redisPrefix: 'rp' });
    env = { REDIS_URL: redis().url, LARGE_GROUP_THRESHOLD: '3', SNAPSHOT_EVERY: '5', STREAM_MAX_LEN: '10' };
    await workload(server);
  });
  afterAll(async () => {
    await server.close();
  });

  it('reconcile --all finds nothing on a clean store, finds a corruption, and --repair repairs it', async () => {
    const clean = await redpoint(['reconcile', '--all', '--json', '--grace', '0'], env);
    expect(clean.code, clean.stderr).toBe(0);
    expect(JSON.parse(clean.stdout)).toMatchObject({ users: 5, conversations: 2, findings: [] });

    const raw = new Redis(redis().url);
    await setCounter(raw, 'rp:{u:ann}:m', 'total', 999);
    raw.disconnect();
    const found = await redpoint(['reconcile', '--user', 'ann', '--grace', '0'], env);
    expect(found.code).toBe(1);
    expect(found.stdout).toContain('totals');
    expect(found.stdout).toContain('stored total 999');

    const repaired = await redpoint(['reconcile', '--all', '--repair', '--grace', '0', '--rate', '1000'], env);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(repaired.stdout).toContain('repaired: 1');
    expect(repaired.stderr).toContain('reconcile ['); // the progress bar (plain lines when not a TTY)
    expect((await server.unread('ann')).total).toBe(2);
  });

  it('inspect user and conv show one screen (and --json the same data)', async () => {
    const user = await redpoint(['inspect', 'user', 'ann'], env);
    expect(user.code, user.stderr).toBe(0);
    expect(user.stdout).toMatch(/badge now: +total 2, mentions 0/);
    expect(user.stdout).toMatch(/team +member +write +group +2 +1 +1/);
    const json = JSON.parse((await redpoint(['inspect', 'user', 'ann', '--json'], env)).stdout) as { version: number };
    expect(json.version).toBe((await server.unread('ann')).version);
    const conv = await redpoint(['inspect', 'conv', 'big'], env);
    expect(conv.stdout).toContain('read diffusion');
    expect(conv.stdout).toMatch(/members: +5/);
    expect((await redpoint(['inspect', 'conv', 'nope'], env)).code).toBe(1);
    // Exit 1 means not found, as --help says, for a user as for a conversation.
    const nobody = await redpoint(['inspect', 'user', 'nobody'], env);
    expect(nobody.code).toBe(1);
    expect(nobody.stdout).toContain('user nobody: not found');
  });

  it('reset-read lowers a read that went too far (to the head by default); a non-member is exit 1', async () => {
    await server.members('oops', { add: ['ann', 'ben'] });
    await server.post({ conv: 'oops', seq: 2, sender: 'ben' });
    await server.ok('POST', '/v1/users/ann/read', { conv: 'oops', seq: 900 });
    const reset = await redpoint(['reset-read', 'ann', 'oops'], env);
    expect(reset.code, reset.stderr).toBe(0);
    expect(reset.stdout).toContain('ann in oops: read position lowered to 2 (the head)');
    await server.post({ conv: 'oops', seq: 3, sender: 'ben' });
    expect((await server.unread('ann')).conversations.find((c) => c.conv === 'oops')).toMatchObject({ readSeq: 2, unread: 1 });
    expect((await redpoint(['reset-read', 'ann', 'oops', '5'], env)).stdout).toContain('unchanged, read position already at 2');
    const stranger = await redpoint(['reset-read', 'zoe', 'oops'], env);
    expect(stranger.code).toBe(1);
    expect(stranger.stdout).toContain('zoe is not a member of oops');
    const nowhere = await redpoint(['reset-read', 'ann', 'nowhere'], env);
    expect(nowhere.code).toBe(1);
    expect(nowhere.stdout).toContain('no such conversation');
    expect((await redpoint(['reset-read', 'ann'], env)).code).toBe(2);
    expect((await redpoint(['reset-read', 'ann', 'oops', '-1'], env)).code).toBe(2);
  });

  it('rebase lowers a head that went wrong with every member; an unknown conversation is exit 1', async () => {
    await server.members('jump', { add: ['ann', 'ben'] });
    await server.post({ conv: 'jump', seq: 1, sender: 'ben' });
    // Within MAX_SEQ_JUMP, and still 90,000 phantom unread.
    await server.post({ conv: 'jump', seq: 90_001, sender: 'ben' });
    const rebased = await redpoint(['rebase', 'jump', '1'], env);
    expect(rebased.code, rebased.stderr).toBe(0);
    expect(rebased.stdout).toContain('conversation jump: head lowered from 90001 to 1; 2 members rebased');
    expect((await server.unread('ann')).conversations.find((c) => c.conv === 'jump')).toMatchObject({ lastSeq: 1, unread: 1 });
    await server.post({ conv: 'jump', seq: 2, sender: 'ben' });
    expect((await server.unread('ann')).conversations.find((c) => c.conv === 'jump')).toMatchObject({ lastSeq: 2, unread: 2 });
    expect((await redpoint(['rebase', 'nowhere', '1'], env)).code).toBe(1);
    expect((await redpoint(['rebase', 'jump'], env)).code).toBe(2);
  });

  it('head re-asserts a head; delete conv removes it for all; erase user leaves no key (a SCAN proves it)', async () => {
    expect((await redpoint(['head', 'team', '5'], env)).stdout).toContain('head 5');
    expect((await server.unread('cat')).conversations.find((c) => c.conv === 'team')?.unread).toBe(3);

    const deleted = await redpoint(['delete', 'conv', 'big'], env);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stdout).toContain('all 5 member(s)');
    expect((await server.api('POST', '/v1/messages', { conv: 'big', seq: 2, sender: 'ann' })).status).toBe(404);

    const erased = await redpoint(['erase', 'user', 'ben'], env);
    expect(erased.code, erased.stdout + erased.stderr).toBe(0);
    expect(erased.stdout).toContain('verified: nothing in the store names ben');
    const raw = new Redis(redis().url);
    try {
      const named: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = await raw.scan(cursor, 'COUNT', 1000);
        cursor = next;
        for (const key of keys) {
          if (key.includes('ben')) named.push(key);
          else if ((await raw.type(key)) === 'hash' && (await raw.hexists(key, 'ben'))) named.push(`${key} field ben`);
        }
      } while (cursor !== '0');
      expect(named).toEqual([]);
    } finally {
      raw.disconnect();
    }
    const clean = await redpoint(['reconcile', '--all', '--json', '--grace', '0'], env);
    expect(JSON.parse(clean.stdout).findings).toEqual([]);
  });

  it('usage errors exit 2 and say what is wrong', async () => {
    const none = await redpoint(['reconcile'], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--all');
    expect((await redpoint(['frobnicate'], env)).code).toBe(2);
    const noStore = await redpoint(['reconcile', '--all'], {});
    expect(noStore.code).toBe(2);
    expect(noStore.stderr).toContain('--url');
  });
});

describe('the redpoint CLI on a memory engine, through the server (--url)', () => {
  let server: TestServer;
  let dir: string;
  const env = { REDPOINT_API_KEY: TEST_API_KEY };

  beforeAll(async () => {
    server = await startTestServer({ engine: 'memory' });
    await workload(server);
    dir = await mkdtemp(join(tmpdir(), 'redpoint-cli-'));
  });
  afterAll(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('reconcile, inspect, import and erase work over the operator endpoints', async () => {
    const clean = await redpoint(['reconcile', '--all', '--json', '--url', server.url], env);
    expect(clean.code, clean.stderr).toBe(0);
    expect(JSON.parse(clean.stdout)).toMatchObject({ users: 5, conversations: 2, findings: [] });

    const file = join(dir, 'import.jsonl');
    await writeFile(
      file,
      [
        JSON.stringify({ conv: 'imp', members: ['ann', 'zed'], maxSeq: 10, category: 'private' }),
        JSON.stringify({ uid: 'zed', conv: 'imp', readSeq: 6, muted: true }),
        'not json',
        '',
      ].join('\n'),
    );
    const imported = await redpoint(['import', file, '--url', server.url], env);
    expect(imported.code).toBe(1); // one bad line
    expect(imported.stdout).toContain('imported 1 conversations, 2 (user, conversation) pairs');
    expect(imported.stdout).toContain('line 3: not valid JSON');
    expect((await server.unread('zed')).conversations).toEqual([expect.objectContaining({ conv: 'imp', unread: 4, muted: true })]);
    expect((await server.unread('ann')).conversations.find((c) => c.conv === 'imp')?.unread).toBe(0);

    const inspected = await redpoint(['inspect', 'user', 'zed', '--url', server.url], env);
    expect(inspected.stdout).toMatch(/imp +member +write +private +10 +6 +4 +0 +muted/);

    const erased = await redpoint(['erase', 'user', 'ann', '--url', server.url], env);
    expect(erased.code, erased.stdout + erased.stderr).toBe(0);
    expect(erased.stdout).toContain('removed from 3 conversation(s) (big, imp, team)');
    expect((await server.ok<{ members: number }>('PUT', '/v1/conversations/team/members', {})).members).toBe(2);

    const wrongKey = await redpoint(['inspect', 'user', 'zed', '--url', server.url], { REDPOINT_API_KEY: 'wrong-key-0123456789' });
    expect(wrongKey.code).toBe(3);
    expect(wrongKey.stderr).toContain('401 unauthorized');
  });

  it('reset-read through the server is logged and counted there; reconcile says "1 conversation"', async () => {
    await server.members('fix', { add: ['yul', 'xan'] });
    await server.post({ conv: 'fix', seq: 10, sender: 'xan' });
    await server.ok('POST', '/v1/users/yul/read', { conv: 'fix', seq: 500 });
    const reset = await redpoint(['reset-read', 'yul', 'fix', '8', '--url', server.url], env);
    expect(reset.stdout).toContain('yul in fix: read position lowered to 8 (seq 8); unread 2');
    const metrics = (await server.request('GET', '/metrics', { auth: 'none' })).text;
    expect(metrics).toContain('redpoint_read_resets_total{outcome="lowered"} 1');
    const plain = await redpoint(['reconcile', '--conv', 'fix', '--url', server.url], env);
    expect(plain.stdout).toContain('checked 0 users and 1 conversation in');
  });

  it('rebase through the server', async () => {
    await server.members('hop', { add: ['yul', 'xan'] });
    await server.post({ conv: 'hop', seq: 50_000, sender: 'xan' });
    const rebased = await redpoint(['rebase', 'hop', '3', '--url', server.url], env);
    expect(rebased.stdout).toContain('conversation hop: head lowered from 50000 to 3; 2 members rebased');
    expect((await server.unread('yul')).conversations.find((c) => c.conv === 'hop')).toMatchObject({ lastSeq: 3, unread: 3 });
    expect((await redpoint(['rebase', 'nowhere', '1', '--url', server.url], env)).code).toBe(1);
  });
});
