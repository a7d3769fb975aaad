import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * What one message costs in Redis commands, measured on a private redis-server: CONFIG RESETSTAT,
 * one POST /v1/messages, INFO commandstats (every command, including those run inside Lua), plus
 * MONITOR for the commands the server itself sent (round-trip level: EVALSHA, HMGET...).
 * Write diffusion costs work per member inside one script; read diffusion (more than 500 members)
 * must cost the same whatever the group size.
 */
const THRESHOLD = 500;
const GROUPS = [
  { name: 'direct', members: 2 },
  { name: 'small group', members: 100 },
  { name: 'large group', members: 1_000 },
  { name: 'large group', members: 5_000 },
] as const;

/** Commands of the measurement itself, not of the server. */
const OWN = new Set(['info', 'config|resetstat', 'echo', 'monitor', 'command|info', 'ping', 'client|setname', 'select']);

interface Cost {
  /** Every command Redis ran, by name (scripts' inner commands included). */
  all: Record<string, number>;
  /** Commands the server sent (not those run inside scripts), by name. */
  sent: Record<string, number>;
}

describe('Redis commands per message (redis engine)', () => {
  let redis: RedisServer;
  let server: TestServer;
  let stats: Redis;
  let monitor: Redis;
  const seen: { args: string[]; source: string }[] = [];
  let writeCommands: Set<string>;
  const nextSeq = new Map<string, number>();

  beforeAll(async () => {
    redis = await startRedisServer();
    server = await startTestServer({ engine: 'redis', redis, largeGroupThreshold: THRESHOLD, snapshotEvery: 100, streamMaxLen: 1000 });
    stats = new Redis(redis.url, { lazyConnect: true });
    await stats.connect();
    monitor = await new Redis(redis.url).monitor();
    monitor.on('monitor', (_time: string, args: string[], source: string) => seen.push({ args, source }));
    for (const g of GROUPS) {
      const conv = convId(g.members);
      const uids = Array.from({ length: g.members }, (_, i) => `m${i}`);
      const res = await server.api<{ members: number; large: boolean }>('PUT', `/v1/conversations/${conv}/members`, { add: uids, category: 'group' });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ conv, members: g.members, large: g.members > THRESHOLD });
    }
  }, 120_000);

  afterAll(async () => {
    monitor?.disconnect();
    stats?.disconnect();
    await server?.close();
    await redis?.stop();
  });

  const convId = (members: number): string => `g${members}`;

  /** Waits until MONITOR has streamed everything Redis ran so far (it streams in execution order). */
  async function drainMonitor(): Promise<void> {
    const marker = `marker-${Date.now()}-${Math.random()}`;
    await stats.echo(marker);
    const deadline = Date.now() + 5_000;
    while (!seen.some((c) => c.args[0]?.toLowerCase() === 'echo' && c.args[1] === marker)) {
      if (Date.now() > deadline) throw new Error('MONITOR did not deliver the marker');
      await new Promise((r) => setImmediate(r));
    }
  }

  /** Waits until a marker round sees none of the server's commands (nothing of this message is still on its way). */
  async function settle(): Promise<void> {
    for (let quiet = 0, rounds = 0; quiet < 2; rounds++) {
      if (rounds > 1_000) throw new Error('Redis did not go quiet');
      const from = seen.length;
      await drainMonitor();
      const busy = seen.slice(from).some((c) => !OWN.has((c.args[0] ?? '').toLowerCase()));
      quiet = busy ? 0 : quiet + 1;
    }
  }

  /** Sends the next message to the group of `members` (from m0), its seq returned. */
  async function post(members: number): Promise<number> {
    const conv = convId(members);
    const seq = (nextSeq.get(conv) ?? 0) + 1;
    nextSeq.set(conv, seq);
    const res = await server.api('POST', '/v1/messages', { conv, seq, sender: 'm0' });
    expect(res.status, res.text).toBe(200);
    return seq;
  }

  async function measure(members: number): Promise<Cost> {
    return measureCall(async () => {
      await post(members);
    });
  }

  /** What `call` costs in Redis commands, once Redis is quiet before and after it. */
  async function measureCall(call: () => Promise<void>): Promise<Cost> {
    await settle();
    seen.length = 0;
    await stats.config('RESETSTAT');
    await call();
    await settle();
    const info = await stats.info('commandstats');
    const all: Record<string, number> = {};
    for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      const name = m[1] ?? '';
      if (!OWN.has(name)) all[name] = Number(m[2]);
    }
    const sent: Record<string, number> = {};
    for (const c of seen) {
      const name = (c.args[0] ?? '').toLowerCase();
      if (c.source === 'lua' || OWN.has(name) || name === 'config') continue;
      sent[name] = (sent[name] ?? 0) + 1;
    }
    return { all, sent };
  }

  const sum = (r: Record<string, number>): number => Object.values(r).reduce((a, b) => a + b, 0);
  const writes = (r: Record<string, number>): number =>
    Object.entries(r)
      .filter(([name]) => writeCommands.has(name))
      .reduce((a, [, n]) => a + n, 0);

  it('a message to a read-diffused group costs the same number of commands at 1,000 and 5,000 members', async () => {
    const names = new Set<string>();
    const rows: { group: string; members: number; mode: string; first: Cost; steady: Cost }[] = [];
    for (const g of GROUPS) {
      // Two messages each: the first and the second cost the same now (no per-process cache).
      const first = await measure(g.members);
      const steady = await measure(g.members);
      rows.push({ group: g.name, members: g.members, mode: g.members > THRESHOLD ? 'read diffusion' : 'write diffusion', first, steady });
      for (const n of [...Object.keys(first.all), ...Object.keys(steady.all)]) names.add(n);
    }
    const flags = (await stats.call('COMMAND', 'INFO', ...[...names].map((n) => n.split('|')[0] ?? n))) as unknown[][];
    writeCommands = new Set([...names].filter((_, i) => ((flags[i]?.[2] as string[] | undefined) ?? []).includes('write')));

    const table = rows.map((r) => ({
      conversation: `${r.group} (${r.members.toLocaleString('en-US')})`,
      mode: r.mode,
      FCALL: r.steady.sent.fcall ?? 0,
      PUBLISH: r.steady.sent.publish ?? 0,
      'other sent': sum(r.steady.sent) - (r.steady.sent.fcall ?? 0) - (r.steady.sent.publish ?? 0),
      'all (incl. in Lua)': sum(r.steady.all),
      'writes in Lua': writes(r.steady.all),
      '1st msg: sent/all/writes': `${sum(r.first.sent)}/${sum(r.first.all)}/${writes(r.first.all)}`,
    }));
    console.log(
      `Redis commands for ONE message (threshold ${THRESHOLD}, sender is a member, no mentions; 2nd message to the conversation, ` +
        'the 1st in the last column). FCALL/PUBLISH/other: commands the server sent; all: every command Redis ran, inside scripts included.',
    );
    console.table(table);
    for (const r of rows) console.log(`  ${r.members} members: sent ${JSON.stringify(r.steady.sent)}; all ${JSON.stringify(r.steady.all)}`);

    const [direct, small, large1k, large5k] = rows;
    if (!direct || !small || !large1k || !large5k) throw new Error('missing rows');
    // Read diffusion: identical command mix at 1,000 and 5,000 members, and small in absolute terms.
    expect(large5k.steady.all).toEqual(large1k.steady.all);
    expect(large5k.steady.sent).toEqual(large1k.steady.sent);
    expect(large5k.first.all).toEqual(large1k.first.all);
    expect(sum(large5k.steady.all)).toBeLessThan(50);
    expect(large5k.steady.sent.fcall ?? 0).toBeLessThanOrEqual(3);
    // Write diffusion: on one Redis, ONE call (ingest_flush.lua) carries the conversation step
    // and every member's user step (the work inside it grows with the group, the round trips do
    // not): one FCALL per message at any size, and nothing else sent.
    expect(small.steady.sent).toEqual(direct.steady.sent);
    expect(direct.steady.sent).toEqual({ fcall: 1 });
    // Per added member (100 vs 2 members, so constants cancel), a message raising the unread
    // count costs at most: writes inside user_apply.lua = 3 (record HSET, meta HSET carrying the
    // version and the totals, RPUSH of the entry; nothing for unchanged fields); every command
    // Redis runs = 7 (HMGET of the fixed meta fields, HGET record, HGET of the one category total
    // the message moves, PUBLISH of the push, and the 3 writes; an HGETALL of the meta instead
    // saves a command but reads every category's total, and measured slower). It was
    // 12 writes and 17 commands (one EVALSHA each) per member before net-delta totals, and 5 and 10
    // before the positional records, the one-hash meta and one script for all members.
    for (const [cost, base] of [
      [small.steady, direct.steady],
      [small.first, direct.first],
    ] as const) {
      const perMember = (f: (r: Record<string, number>) => number): number => (f(cost.all) - f(base.all)) / 98;
      expect(perMember(writes), JSON.stringify(cost.all)).toBeLessThanOrEqual(3);
      expect(perMember(sum), JSON.stringify(cost.all)).toBeLessThanOrEqual(7);
    }
  }, 120_000);

  it('a read-diffused group costs its member one command to read on one Redis: GET /unread and a pull read the heads in the same step (and one pipelined HMGET of its activity and @all seqs)', async () => {
    // Besides the one step: read receipts' peer positions (the user's shareReads setting, then one
    // reads_peers.lua call for the write-diffused conversations), sent alongside.
    const receipts = { get: 1, fcall: 2 };
    // ... and issue 43's last activity and @all seqs of each read-diffused group: one HMGET per
    // group, pipelined (Engine.headExtras), not yet folded into the step that reads the heads.
    const extras = { hmget: 2 };
    // m1 is in both read-diffused groups (1,000 and 5,000 members), the 100-member one and the direct conversation.
    const heads = { [convId(1_000)]: await post(1_000), [convId(5_000)]: await post(5_000) };
    let unread: { status: number; body: { conversations: Array<{ conv: string; lastSeq: number }> } } | undefined;
    const reading = await measureCall(async () => {
      unread = await server.asUser<{ conversations: Array<{ conv: string; lastSeq: number }> }>('m1', 'GET', '/v1/users/m1/unread');
    });
    expect(unread?.status).toBe(200);
    for (const [conv, head] of Object.entries(heads)) expect(unread?.body.conversations.find((c) => c.conv === conv)?.lastSeq).toBe(head);
    expect(reading.sent).toEqual({ ...receipts, ...extras });
    let pull: { status: number; body: { heads: Record<string, number> } } | undefined;
    const pulling = await measureCall(async () => {
      pull = await server.asUser<{ heads: Record<string, number> }>('m1', 'GET', '/v1/sync');
    });
    expect(pull?.status).toBe(200);
    expect(pull?.body.heads).toEqual(heads);
    expect(pulling.sent).toEqual({ ...receipts, ...extras });
  }, 60_000);
});
