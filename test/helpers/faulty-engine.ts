import { RedpointError } from '../../protocol/errors.js';
import type { Engine } from '../../server/engine/engine.js';

/**
 * A real engine with a switch, for replies that need a failing store: `fail` makes every call
 * throw an unexpected error (500 internal), `down` makes it answer as an unreachable store does
 * (503 unavailable, `ready()` false); its `admin()` view (the operator's endpoints) fails alike.
 * `holdClose()` keeps `close()` pending until released, so a server stays in its shutdown
 * (refusing new requests) for as long as a test needs.
 */
export type EngineFault = 'none' | 'fail' | 'down';

export interface FaultyEngine {
  engine: Engine;
  fault: EngineFault;
  /** Makes the next `close()` wait; call the returned function to let it finish. */
  holdClose(): () => void;
}

export function faultyEngine(inner: Engine): FaultyEngine {
  let hold: Promise<void> | undefined;
  const control: FaultyEngine = {
    fault: 'none',
    engine: switched(inner),
    holdClose() {
      let release = (): void => undefined;
      hold = new Promise((resolve) => (release = resolve));
      return release;
    },
  };
  /** Every method of `target` behind the switch; `admin()` (the operator's view) returns its store behind the same switch. */
  function switched<T extends object>(target: T): T {
    return new Proxy(target, {
      get(obj, prop, receiver) {
        const value: unknown = Reflect.get(obj, prop, receiver);
        // Read receipts' store (engine.readPositions) fails alike.
        if (prop === 'readPositions' && typeof value === 'object' && value !== null) return switched(value);
        if (typeof value !== 'function') return value;
        if (prop === 'admin') return () => switched((value as () => object).apply(obj));
        return async (...args: unknown[]) => {
          if (prop === 'close') {
            await hold;
          } else if (control.fault === 'fail') {
            throw new Error('injected engine failure');
          } else if (control.fault === 'down') {
            if (prop === 'ready') return false;
            throw new RedpointError('unavailable', 'injected: store unreachable');
          }
          return (value as (...a: unknown[]) => unknown).apply(obj, args);
        };
      },
    });
  }
  return control;
}
