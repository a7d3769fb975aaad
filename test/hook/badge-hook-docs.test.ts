import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Value } from '@sinclair/typebox/value';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Badge, BadgeEventSchema, badgeEvent } from '../../server/hook/badge-event.js';
import { WebhookSink } from '../../server/hook/sinks.js';
import { BadgeReceiver } from './receiver.js';

/**
 * docs/badge-hook.md is the push-service implementer's contract: its JSON Schema is the one the
 * server declares, its example event is valid, and its verification example — run here as
 * printed — accepts what the real webhook sink sends over HTTP and refuses a forged body, another
 * secret and a replay.
 */
const DOC = new URL('../../docs/badge-hook.md', import.meta.url);
const SECRET = 'docs-badge-secret-0123456789abcdef0123';

function blockAfter(doc: string, marker: string | null, lang: string): string {
  const from = marker === null ? 0 : doc.indexOf(marker);
  expect(from, marker ?? lang).toBeGreaterThanOrEqual(0);
  const open = doc.indexOf(`\`\`\`${lang}\n`, from);
  const close = doc.indexOf('\n```', open + 4);
  return doc.slice(open + lang.length + 4, close + 1);
}

type Verify = (secret: string, timestamp: string | undefined, signature: string | undefined, rawBody: string, nowSeconds?: number) => boolean;

describe('docs/badge-hook.md', () => {
  let doc: string;
  let dir: string;
  let verify: Verify;
  const receiver = new BadgeReceiver(SECRET);

  beforeAll(async () => {
    doc = await readFile(DOC, 'utf8');
    dir = await mkdtemp(join(tmpdir(), 'badge-docs-'));
    const file = join(dir, 'verify.mjs');
    await writeFile(file, blockAfter(doc, '<!-- verify-example -->', 'js'));
    ({ verifyBadgeHook: verify } = (await import(pathToFileURL(file).href)) as { verifyBadgeHook: Verify });
    await receiver.start();
  });
  afterAll(async () => {
    await receiver.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('prints the event schema the server declares, and an example that is valid under it', () => {
    expect(JSON.parse(blockAfter(doc, '<!-- badge-event-schema -->', 'json'))).toEqual(JSON.parse(JSON.stringify(BadgeEventSchema)));
    const example: unknown = JSON.parse(blockAfter(doc, '## The event', 'json'));
    expect([...Value.Errors(BadgeEventSchema, example)]).toEqual([]);
  });

  it('its verification example accepts the real sink’s request and refuses a forged body, another secret and a replay', async () => {
    const badge: Badge = { total: 2, mentions: 1, categories: { default: 2 } };
    const event = badgeEvent('zoe', 42, badge, { total: 5, mentions: 1, categories: { default: 5 } }, Date.now());
    expect(Value.Check(BadgeEventSchema, event)).toBe(true);
    await new WebhookSink({ url: receiver.url, secret: SECRET, timeoutMs: 5_000 }).deliver(event);
    const req = receiver.requests.at(-1);
    if (!req) throw new Error('no request arrived');
    expect(req.idempotencyKey).toBe('zoe:42');
    expect(receiver.events.at(-1)).toEqual(event);
    const ts = Number(req.timestamp);
    expect(verify(SECRET, req.timestamp, req.signature, req.body, ts)).toBe(true);
    expect(verify(SECRET, req.timestamp, req.signature, req.body.replace('"total":2', '"total":0'), ts)).toBe(false);
    expect(verify('another-secret-0123456789abcdef0123', req.timestamp, req.signature, req.body, ts)).toBe(false);
    expect(verify(SECRET, String(ts - 1), req.signature, req.body, ts)).toBe(false);
    expect(verify(SECRET, req.timestamp, req.signature, req.body, ts + 301)).toBe(false);
    expect(verify(SECRET, req.timestamp, req.signature, req.body, ts + 300)).toBe(true);
    expect(verify(SECRET, undefined, req.signature, req.body, ts)).toBe(false);
  });
});
