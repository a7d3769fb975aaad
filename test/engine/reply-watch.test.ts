import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ReplyWatch } from '../../server/engine/redis/reply-watch.js';
import { OutcomeUnknownError } from '../../server/engine/store-errors.js';

const T = 100;

/** A command whose reply comes after `ms`. */
const replyAfter = (ms: number, value: string) => () => delay(ms).then(() => value);

describe('ReplyWatch: a timeout means no reply at all, not a slow batch', () => {
  it('a batch whose replies keep coming is not timed out, however long it takes in all', async () => {
    const watch = new ReplyWatch(T);
    // Ten commands sent together, answered one every T/2: the last after 5 T.
    const batch = Array.from({ length: 10 }, (_, i) => watch.track(replyAfter((i + 1) * (T / 2), `r${i}`)));
    expect(await Promise.all(batch)).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
  });

  it('commands on a server that stopped answering fail after the timeout, outcome unknown', async () => {
    const watch = new ReplyWatch(T);
    const started = Date.now();
    const stuck = [watch.track(() => new Promise<string>(() => undefined)), watch.track(() => new Promise<string>(() => undefined))];
    for (const p of stuck) await expect(p).rejects.toBeInstanceOf(OutcomeUnknownError);
    const ms = Date.now() - started;
    expect(ms).toBeGreaterThanOrEqual(T);
    expect(ms).toBeLessThan(T * 10);
    // The watch carries on for later commands.
    expect(await watch.track(replyAfter(1, 'ok'))).toBe('ok');
  });
});
