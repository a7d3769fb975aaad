import { adminOf, type EngineAdmin } from '../../server/engine/admin.js';
import type { Engine } from '../../server/engine/engine.js';
import type { ReadPositions } from '../../server/engine/read-positions.js';

/** The Engine methods that talk to the store (each is one await point of a caller). */
export const STORE_CALLS = [
  'claimJoins',
  'changeMembers',
  'roster',
  'finishRewrite',
  'getConversation',
  'missingConversations',
  'recordMessages',
  'heads',
  'applyUserOps',
  'pull',
  'position',
  'userState',
  'addTopic',
  'topicReady',
  'topics',
  'addThread',
  'threads',
  'joinTag',
] as const satisfies readonly (keyof Engine)[];

export type StoreCall = (typeof STORE_CALLS)[number];

/** Where a call stands when the control sees it: about to go to the store, or back from it. */
export type Phase = 'before' | 'after';

export interface CallPoint {
  index: number;
  /** A StoreCall, or a method of another controlled view (the toolbox's EngineAdmin). */
  method: string;
  phase: Phase;
}

/**
 * What the control does at a point: nothing, hold the caller there until released, or fail the
 * call — before it reaches the store (nothing applied), after it (applied, the reply lost, as when
 * the process dies or the connection drops right then), or, for applyUserOps, halfway (the first
 * `applied` ops land, the rest do not).
 */
export type Control = { kind: 'pass' } | { kind: 'hold'; release: Promise<void> } | { kind: 'fail' } | { kind: 'fail-partway'; applied: number };

export class InjectedFault extends Error {
  constructor(point: CallPoint) {
    super(`injected fault ${point.phase} ${point.method} #${point.index}`);
    this.name = 'InjectedFault';
  }
}

/** Call numbering and the record of points reached, shared by every view made with it. */
export interface Controller {
  control: (point: CallPoint) => Control;
  calls: CallPoint[];
  next: number;
}

/**
 * A view of `engine` whose store calls go through `control` at each await point, numbered in
 * call order: the caller's interleavings and partial failures, made systematic. Anything that is
 * not a store call (kind, notifications) is the engine's own.
 */
export function controlledEngine(engine: Engine, control: (point: CallPoint) => Control): { engine: Engine; calls: CallPoint[] } {
  const controller: Controller = { control, calls: [], next: 0 };
  // Engine.recordAndApply (a whole flush in one atomic call, RedisEngine on one Redis) has no
  // await point between its steps; hidden, ingest goes as the two steps, so every point between
  // them is tried: the path a cluster and large flushes take, and the interleavings the one call
  // is one of.
  const twoSteps = new Proxy(engine, { get: (t, prop, receiver) => (prop === 'recordAndApply' ? undefined : Reflect.get(t, prop, receiver)) });
  // The user settings' store calls (SyncService.setMutedMentions: the setting, then the restream) too.
  const readPositions = controlledView(engine.readPositions, SETTING_CALLS, controller);
  const admin = (): EngineAdmin => controlledView(adminOf(engine), ADMIN_CALLS, controller);
  const withSettings = new Proxy(twoSteps, {
    get: (t, prop, receiver) => (prop === 'readPositions' ? readPositions : prop === 'admin' ? admin : Reflect.get(t, prop, receiver)),
  });
  return { engine: controlledView(withSettings, STORE_CALLS, controller), calls: controller.calls };
}

/** The read positions' calls a settings change makes (the others are read receipts', not driven here). */
const SETTING_CALLS = ['setMutedMentions', 'mutedMentions'] as const satisfies readonly (keyof ReadPositions)[];
/** The toolbox's calls a settings change makes (its restream). */
const ADMIN_CALLS = ['rebuildUser'] as const satisfies readonly (keyof EngineAdmin)[];

/** `target` with the methods named in `methods` going through the controller (numbered with every other view of it). */
export function controlledView<T extends object>(target: T, methods: readonly string[], controller: Controller): T {
  const calling = new Set<string>(methods);
  const obey = async (point: CallPoint, c: Control): Promise<void> => {
    controller.calls.push(point);
    if (c.kind === 'hold') await c.release;
    if (c.kind === 'fail') throw new InjectedFault(point);
  };
  return new Proxy(target, {
    get(t, prop, receiver) {
      const value: unknown = Reflect.get(t, prop, receiver);
      if (typeof prop !== 'string' || !calling.has(prop) || typeof value !== 'function') return value;
      const method = prop;
      return async (...args: unknown[]): Promise<unknown> => {
        const index = controller.next++;
        const call = value as (...a: unknown[]) => Promise<unknown>;
        const before: CallPoint = { index, method, phase: 'before' };
        await obey(before, controller.control(before));
        const after: CallPoint = { index, method, phase: 'after' };
        const then = controller.control(after);
        if (then.kind === 'fail-partway') {
          controller.calls.push(after);
          const ops = args[0] as unknown[];
          await call.apply(t, [ops.slice(0, then.applied), ...args.slice(1)]);
          throw new InjectedFault(after);
        }
        const result = await call.apply(t, args);
        await obey(after, then);
        return result;
      };
    },
  });
}

/**
 * The faults tried at one store call: it fails before reaching the store, after it (applied, the
 * reply lost), and, for applyUserOps, halfway. Each with the point it is injected at, and a
 * control that injects it there once.
 */
export function faultsAt(p: CallPoint): { fault: Control; at: CallPoint; control: () => (q: CallPoint) => Control; injected: () => boolean }[] {
  const list: [Control, CallPoint][] = [
    [{ kind: 'fail' }, p],
    [{ kind: 'fail' }, { ...p, phase: 'after' }],
  ];
  if (p.method === 'applyUserOps')
    list.push([
      { kind: 'fail-partway', applied: 1 },
      { ...p, phase: 'after' },
    ]);
  return list.map(([fault, at]) => {
    let done = false;
    return {
      fault,
      at,
      injected: () => done,
      control: () => (q) => {
        if (done || q.index !== at.index || q.phase !== at.phase) return { kind: 'pass' };
        done = true;
        return fault;
      },
    };
  });
}
