import { describe, expect, it } from 'vitest';
import { FORCE_AFTER_MS, StopSignals } from '../../server/stop-signals.js';

function harness(): { signals: StopSignals; calls: string[]; at: { t: number } } {
  const at = { t: 1_000 };
  const signals = new StopSignals({ now: () => at.t, listen: false });
  return { signals, calls: [], at };
}

describe('stop signals', () => {
  it('a signal during start-up is kept and handed to stop once the server is up; later ones force', () => {
    const { signals, calls, at } = harness();
    signals.deliver('SIGTERM');
    signals.handle(
      (s) => calls.push(`stop ${s}`),
      (s) => calls.push(`force ${s}`),
    );
    expect(calls).toEqual(['stop SIGTERM']);
    at.t += FORCE_AFTER_MS;
    signals.deliver('SIGINT');
    expect(calls).toEqual(['stop SIGTERM', 'force SIGINT']);
  });

  it('the same key press arriving twice (a terminal and npm both send SIGINT) is one stop, not a force', () => {
    const { signals, calls, at } = harness();
    signals.handle(
      (s) => calls.push(`stop ${s}`),
      (s) => calls.push(`force ${s}`),
    );
    signals.deliver('SIGINT');
    at.t += 5;
    signals.deliver('SIGINT');
    at.t += FORCE_AFTER_MS - 10;
    signals.deliver('SIGINT');
    expect(calls).toEqual(['stop SIGINT']);
    at.t += 5;
    signals.deliver('SIGTERM');
    expect(calls).toEqual(['stop SIGINT', 'force SIGTERM']);
  });
});
