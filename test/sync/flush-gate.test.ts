import { describe, expect, it } from 'vitest';
import { FlushGate } from '../../server/sync/flush-gate.js';

/** A task that runs until released, recording when it started. */
function controllable(log: string[], name: string): { task: () => Promise<void>; release: () => void } {
  let release = (): void => undefined;
  const done = new Promise<void>((resolve) => (release = resolve));
  return {
    task: async () => {
      log.push(`start ${name}`);
      await done;
      log.push(`end ${name}`);
    },
    release: () => release(),
  };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('FlushGate', () => {
  it('runs shared tasks together and an exclusive one alone, in arrival order', async () => {
    const gate = new FlushGate();
    const log: string[] = [];
    const a = controllable(log, 'a');
    const b = controllable(log, 'b');
    const x = controllable(log, 'x');
    const c = controllable(log, 'c');
    const runs = [gate.run('shared', a.task), gate.run('shared', b.task), gate.run('exclusive', x.task), gate.run('shared', c.task)];
    await tick();
    // c arrived after x: it must not overtake the queued exclusive task.
    expect(log).toEqual(['start a', 'start b']);
    a.release();
    await tick();
    expect(log).toEqual(['start a', 'start b', 'end a']);
    b.release();
    await tick();
    expect(log.slice(3)).toEqual(['end b', 'start x']);
    x.release();
    await tick();
    expect(log.slice(5)).toEqual(['end x', 'start c']);
    c.release();
    await Promise.all(runs);
  });

  it('keeps going after a failed task, and idle() waits for what was admitted', async () => {
    const gate = new FlushGate();
    await expect(gate.run('shared', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    const log: string[] = [];
    const a = controllable(log, 'a');
    const run = gate.run('shared', a.task);
    let idle = false;
    const waiting = gate.idle().then(() => (idle = true));
    await tick();
    expect(idle).toBe(false);
    a.release();
    await Promise.all([run, waiting]);
    expect(idle).toBe(true);
    expect(await gate.run('exclusive', async () => 42)).toBe(42);
  });
});
