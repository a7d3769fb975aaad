import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ReplyWatch } from '../../server/engine/redis/reply-watch.js';
import { OutcomeUnknownError } from '../../server/engine/store-errors.js';

/**
 * On fake timers (setTimeout, setImmediate and Date alike), so the timeout is checked to the
 * millisecond and a loaded machine cannot move it.
 */
const T = 100;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A command whose reply comes after `ms` (fake time). */
const replyAfter = (ms: number, value: string) => () => new Promise<string>((resolve) => setTimeout(() => resolve(value), ms));

/** The promise's outcome so far, without waiting for it. */
function watchOutcome<T>(p: Promise<T>): () => 'pending' | 'resolved' | 'rejected' {
  let outcome: 'pending' | 'resolved' | 'rejected' = 'pending';
  p.then(
    () => (outcome = 'resolved'),
    () => (outcome = 'rejected'),
  );
  return () => outcome;
}

describe('ReplyWatch: a timeout means no reply at all, not a slow batch', () => {
  it('a batch whose replies keep coming is not timed out, however long it takes in all', async () => {
    const watch = new ReplyWatch(T);
    // Ten commands sent together, answered one every T/2: the last after 5 T.
    const batch = Promise.all(Array.from({ length: 10 }, (_, i) => watch.track(replyAfter((i + 1) * (T / 2), `r${i}`))));
    const outcome = watchOutcome(batch);
    await vi.advanceTimersByTimeAsync(5 * T);
    expect(outcome()).toBe('resolved');
    expect(await batch).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
  });

  it('commands on a server that stopped answering fail once the timeout has passed, not before, outcome unknown', async () => {
    const watch = new ReplyWatch(T);
    const stuck = [watch.track(() => new Promise<string>(() => undefined)), watch.track(() => new Promise<string>(() => undefined))];
    const outcomes = stuck.map(watchOutcome);
    await vi.advanceTimersByTimeAsync(T - 1);
    expect(outcomes.map((o) => o())).toEqual(['pending', 'pending']);
    // The verdict is taken in a setImmediate after the timer (fake timers run it a tick later).
    await vi.advanceTimersByTimeAsync(2);
    expect(outcomes.map((o) => o())).toEqual(['rejected', 'rejected']);
    for (const p of stuck) await expect(p).rejects.toBeInstanceOf(OutcomeUnknownError);
    // The watch carries on for later commands.
    const later = watch.track(replyAfter(1, 'ok'));
    await vi.advanceTimersByTimeAsync(1);
    expect(await later).toBe('ok');
  });

  it('the timeout counts from the last reply: a command sent behind a slow one waits a full timeout after that reply', async () => {
    const watch = new ReplyWatch(T);
    const slow = watch.track(replyAfter(T - 10, 'slow'));
    const stuck = watch.track(() => new Promise<string>(() => undefined));
    const outcome = watchOutcome(stuck);
    await vi.advanceTimersByTimeAsync(T - 10);
    expect(await slow).toBe('slow');
    await vi.advanceTimersByTimeAsync(T - 1);
    expect(outcome()).toBe('pending');
    // The verdict is taken in a setImmediate after the timer (fake timers run it a tick later).
    await vi.advanceTimersByTimeAsync(2);
    expect(outcome()).toBe('rejected');
    await expect(stuck).rejects.toBeInstanceOf(OutcomeUnknownError);
  });
});
