import { describe, expect, it } from 'vitest';
import type { ConvView, MessageEvent } from '../../protocol/types.js';
import { LocalToolbox } from '../../server/admin/toolbox.js';
import { adminOf, type EngineAdmin } from '../../server/engine/admin.js';
import type { Engine } from '../../server/engine/engine.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { isEqual } from '../helpers/equal.js';
import { Model, type ModelSummary } from '../http/model.js';
import { type CallPoint, type Control, type Controller, controlledView, faultsAt, InjectedFault, STORE_CALLS } from '../sync/controlled-engine.js';
import { deferred, shown } from '../sync/interleavings.js';
import { walk } from './toolbox-suite.js';

/**
 * The operator's writes (delete a conversation for all, erase a user, re-assert a head, rebase a
 * conversation's head) run by
 * one process (A) with another process (B) doing ordinary traffic at every await point of A —
 * A's store calls and its EngineAdmin calls alike — and A failing at each of them and retrying.
 * Each run must end in the outcome of one order of A and B, and reconcile must find nothing.
 */
type Step =
  | { members: string; add?: string[]; remove?: string[] }
  | { messages: MessageEvent[] }
  | { deleteConv: string }
  | { erase: string }
  | { head: string; seq: number }
  | { rebase: string; seq: number };

interface Seen {
  uid: string;
  summary: ModelSummary;
  pulled: ModelSummary;
}

interface Scenario {
  name: string;
  setup: Step[];
  change: Step;
  concurrent: Step;
  after: Step[];
  users: string[];
  /** Whether what every user shows (and what the store holds) is an outcome of one order. */
  accept(
    seen: Seen[],
    traces: (uid: string) => Promise<{ state: boolean; listedIn: string[] }>,
    head: (conv: string) => Promise<number | undefined>,
  ): Promise<boolean>;
}

const THRESHOLD = 3;
const ADMIN_CALLS = [
  'scanUsers',
  'scanConversations',
  'readUser',
  'readConversation',
  'conversationViews',
  'records',
  'rebuildUser',
  'repairConversation',
  'wipeUser',
  'beginDelete',
  'finishDelete',
  'convsListing',
  'rebaseConversation',
] as const satisfies readonly (keyof EngineAdmin)[];
const m = (conv: string, seq: number, sender: string, mentions?: string[]): MessageEvent => ({ conv, seq, sender, ...(mentions ? { mentions } : {}) });

/** A head re-assert is, to the model, a message at that seq from someone who is no member. */
function modelOf(steps: Step[]): Model {
  const model = new Model(THRESHOLD);
  for (const s of steps) {
    if ('members' in s) model.changeMembers(s.members, s.add ?? [], s.remove ?? []);
    else if ('messages' in s) model.postMessages(s.messages);
    else if ('head' in s) model.postMessages([{ conv: s.head, seq: s.seq, sender: 'nobody-at-all' }]);
    else throw new Error('the model has no delete, erase or rebase');
  }
  return model;
}

/** Every user equals the model of one order of A's and B's steps (both ways of seeing it). */
function linearizable(s: { setup: Step[]; change: Step; concurrent: Step; after: Step[] }): Scenario['accept'] {
  return async (seen) =>
    [
      [...s.setup, s.change, s.concurrent, ...s.after],
      [...s.setup, s.concurrent, s.change, ...s.after],
    ].some((steps) => {
      const model = modelOf(steps);
      return seen.every((u) => isEqual(u.summary, model.unread(u.uid)) && isEqual(u.pulled, model.unread(u.uid)));
    });
}

const convsOf = (u: Seen): string[] => u.summary.conversations.map((c) => c.conv).sort();

type Shown = Pick<ConvView, 'lastSeq' | 'readSeq' | 'unread' | 'mentions'>;

/**
 * A rebase lowers what the model only raises, so its outcomes are spelled out: the head of `conv`
 * and what every user shows of it (summary and pull alike) after one of the orders.
 */
function oneOf(conv: string, orders: ReadonlyArray<{ head: number; users: Record<string, Shown> }>): Scenario['accept'] {
  const pick = (s: ModelSummary): Shown | undefined => {
    const v = s.conversations.find((c) => c.conv === conv);
    return v && { lastSeq: v.lastSeq, readSeq: v.readSeq, unread: v.unread, mentions: v.mentions };
  };
  return async (seen, _traces, head) => {
    const now = await head(conv);
    return orders.some(
      (order) =>
        order.head === now &&
        seen.every((u) => {
          const want = order.users[u.uid];
          return want !== undefined && isEqual(pick(u.summary), want) && isEqual(pick(u.pulled), want);
        }),
    );
  };
}

/** A head a timestamp sent as a seq raised, before MAX_SEQ_JUMP refused it. */
const BAD_SEQ = 1_700_000_000;
const view = (lastSeq: number, readSeq: number, mentions = 0): Shown => ({ lastSeq, readSeq, unread: lastSeq - readSeq, mentions });
const rebaseSetup: Step[] = [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }, { messages: [m('g', BAD_SEQ, 'a')] }];
/**
 * g rebased to 1 and b's message 2 mentioning a. Rebase first: 2 lands above the new head and
 * mentions a. Message first: 2 lands below the bad head (a's send read it, the mention with it),
 * and the rebase lowers everything to 1. Never the bad head back, nor a member above the head.
 */
const rebaseOrMessageFirst = [
  { head: 2, users: { a: view(2, 1, 1), b: view(2, 2) } },
  { head: 1, users: { a: view(1, 1), b: view(1, 1) } },
  // The rebase's documented cost (admin/rebase.ts): a read or mention above the new head that
  // raced it is lowered with the bad ones. b's send of 2 landed between the rebase's steps: its
  // read is lowered to 1 (step 2) while its message stands (step 3)...
  { head: 2, users: { a: view(2, 1), b: view(2, 1) } },
  // ... or was recorded before the rebase and landed after it: ignored with its generation, so b
  // does not read message 1 by it.
  { head: 1, users: { a: view(1, 1), b: view(1, 0) } },
];

const headScenario = (name: string, setup: Step[], concurrent: Step, after: Step[], users: string[]): Scenario => {
  const change: Step = { head: 'g', seq: 9 };
  return { name, setup, change, concurrent, after, users, accept: linearizable({ setup, change, concurrent, after }) };
};

export const SCENARIOS: Scenario[] = [
  headScenario(
    'a head re-assert while a member joins',
    [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }],
    { members: 'g', add: ['u'] },
    [{ messages: [m('g', 10, 'b')] }],
    ['a', 'b', 'u'],
  ),
  headScenario(
    'a head re-assert while a message is ingested',
    [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }],
    { messages: [m('g', 2, 'b', ['a'])] },
    [],
    ['a', 'b'],
  ),
  headScenario(
    'a head re-assert while the group switches to read diffusion',
    [{ members: 'g', add: ['a', 'b', 'c'] }, { messages: [m('g', 1, 'a')] }],
    { members: 'g', add: ['d'] },
    [{ messages: [m('g', 10, 'a', ['d'])] }],
    ['a', 'b', 'c', 'd'],
  ),
  headScenario(
    'a head re-assert while the group switches back to write diffusion',
    [{ members: 'g', add: ['a', 'b', 'c', 'd'] }, { messages: [m('g', 1, 'a')] }],
    { members: 'g', remove: ['d'] },
    [{ messages: [m('g', 10, 'c')] }],
    ['a', 'b', 'c', 'd'],
  ),
  {
    name: 'a rebase while a message mentioning a member is ingested',
    setup: rebaseSetup,
    change: { rebase: 'g', seq: 1 },
    concurrent: { messages: [m('g', 2, 'b', ['a'])] },
    after: [],
    users: ['a', 'b'],
    accept: oneOf('g', rebaseOrMessageFirst),
  },
  {
    // The other way round: a message recorded before the rebase whose ops land after it.
    name: 'a message mentioning a member is ingested while the conversation is rebased',
    setup: rebaseSetup,
    change: { messages: [m('g', 2, 'b', ['a'])] },
    concurrent: { rebase: 'g', seq: 1 },
    after: [],
    users: ['a', 'b'],
    accept: oneOf('g', rebaseOrMessageFirst),
  },
  {
    name: 'a rebase while a member joins',
    setup: rebaseSetup,
    change: { rebase: 'g', seq: 1 },
    concurrent: { members: 'g', add: ['u'] },
    after: [{ messages: [m('g', 2, 'b')] }],
    users: ['a', 'b', 'u'],
    // Join first: u joined at the bad head, and the rebase lowers u's join with everyone's.
    accept: oneOf('g', [{ head: 2, users: { a: view(2, 1), b: view(2, 2), u: view(2, 1) } }]),
  },
  {
    name: 'a delete for all while a message is ingested',
    setup: [{ members: 'g', add: ['a', 'b'] }, { members: 'h', add: ['a'] }, { messages: [m('g', 1, 'b'), m('h', 1, 'b')] }],
    change: { deleteConv: 'g' },
    concurrent: { messages: [m('g', 2, 'b', ['a'])] },
    after: [{ messages: [m('h', 2, 'b')] }],
    users: ['a', 'b'],
    // Either order: g is gone for everyone, h untouched.
    accept: async (seen) => seen.every((u) => !convsOf(u).includes('g')) && seen[0]?.summary.total === 2,
  },
  {
    name: 'a delete for all while a member is added',
    setup: [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'b')] }],
    change: { deleteConv: 'g' },
    concurrent: { members: 'g', add: ['u'] },
    after: [],
    users: ['a', 'b', 'u'],
    // Add then delete: g is gone for all. Delete then add: g is a new conversation of u alone.
    accept: async (seen) => {
      const [a, b, u] = seen;
      if (!a || !b || !u || convsOf(a).includes('g') || convsOf(b).includes('g')) return false;
      return convsOf(u).length === 0 || (convsOf(u).join() === 'g' && u.summary.total === 0);
    },
  },
  {
    name: 'an erase while the user is added to a conversation',
    setup: [{ members: 'g', add: ['a', 'u'] }, { members: 'h', add: ['a'] }, { messages: [m('g', 1, 'a', ['u'])] }],
    change: { erase: 'u' },
    concurrent: { members: 'h', add: ['u'] },
    after: [{ messages: [m('h', 1, 'a')] }],
    users: ['a', 'u'],
    // Add then erase: nothing of u is left. Erase then add: u exists again, in h only.
    accept: async (seen, traces) => {
      const u = seen[1];
      if (!u) return false;
      const left = await traces('u');
      if (convsOf(u).length === 0) return !left.state && left.listedIn.length === 0;
      return convsOf(u).join() === 'h' && left.listedIn.join() === 'h';
    },
  },
  {
    name: 'an erase while a message mentioning the user is ingested',
    setup: [{ members: 'g', add: ['a', 'u'] }, { messages: [m('g', 1, 'a')] }],
    change: { erase: 'u' },
    concurrent: { messages: [m('g', 2, 'a', ['u'])] },
    after: [{ messages: [m('g', 3, 'a', ['u'])] }],
    users: ['a', 'u'],
    accept: async (seen, traces) => {
      const left = await traces('u');
      return seen[1]?.summary.conversations.length === 0 && !left.state && left.listedIn.length === 0 && seen[0]?.summary.total === 0;
    },
  },
];

export function adminInterleavingSuite(name: string, fresh: () => Promise<{ engine: Engine; cleanup(): Promise<void> }>): void {
  describe(`operator writes against another process, every await point and fault: ${name}`, () => {
    for (const s of SCENARIOS) {
      // The conversation this scenario's A or B deletes: only messages to it may be refused.
      const deleted = [s.change, s.concurrent].flatMap((step) => ('deleteConv' in step ? [step.deleteConv] : []));
      async function run(toolbox: LocalToolbox, sync: SyncService, step: Step): Promise<void> {
        if ('members' in step) await sync.changeMembers(step.members, { add: step.add ?? [], remove: step.remove ?? [] });
        else if ('messages' in step) {
          // A message for a conversation deleted first is refused: that is one of the orders. Any
          // other step refused is a failure, not an order.
          const refusable = step.messages.every((msg) => deleted.includes(msg.conv));
          await sync.postMessages(step.messages).catch((err: unknown) => {
            if (!refusable || (err as { code?: string }).code !== 'unknown_conversation') throw err;
          });
        } else if ('deleteConv' in step) await toolbox.deleteConversation(step.deleteConv);
        else if ('erase' in step) await toolbox.eraseUser(step.erase, { scan: false });
        else if ('rebase' in step) await toolbox.rebase(step.rebase, step.seq);
        else await toolbox.reassertHeads([{ conv: step.head, maxSeq: step.seq }]);
      }

      async function runCase(control: (p: CallPoint) => Control, hold?: CallPoint): Promise<{ calls: CallPoint[]; held: boolean; ok: boolean; label: string }> {
        const store = await fresh();
        try {
          const settings = { snapshotEvery: 4, streamMaxLen: 100, largeGroupThreshold: THRESHOLD };
          const plainToolbox = new LocalToolbox(store.engine, adminOf(store.engine), settings);
          const plain = new SyncService(store.engine, { largeGroupThreshold: THRESHOLD });
          for (const step of s.setup) await run(plainToolbox, plain, step);
          const reached = deferred();
          const release = deferred();
          let held = false;
          const controller: Controller = {
            calls: [],
            next: 0,
            control: (p) => {
              if (hold && p.index === hold.index && p.phase === hold.phase) {
                held = true;
                reached.resolve();
                return { kind: 'hold', release: release.promise };
              }
              return control(p);
            },
          };
          const engine = controlledView(store.engine, STORE_CALLS, controller);
          const admin = controlledView(adminOf(store.engine), ADMIN_CALLS, controller);
          const a = new LocalToolbox(engine, admin, settings);
          const changing = run(a, new SyncService(engine, { largeGroupThreshold: THRESHOLD }), s.change).then(
            () => undefined,
            (err: unknown) => err,
          );
          await Promise.race([reached.promise, changing]);
          await run(plainToolbox, plain, s.concurrent);
          release.resolve();
          const failure = await changing;
          if (failure !== undefined) {
            if (!(failure instanceof InjectedFault)) throw failure;
            await run(plainToolbox, plain, s.change);
          }
          for (const step of s.after) await run(plainToolbox, plain, step);
          const seen = await Promise.all(s.users.map(async (uid) => ({ uid, ...(await shown(plain, uid)) })));
          const clean = (await walk(plainToolbox, false)).findings;
          const head = async (conv: string) => (await store.engine.heads([conv])).get(conv);
          const ok = (await s.accept(seen, (uid) => plainToolbox.traces(uid), head)) && clean.length === 0;
          return { calls: controller.calls, held, ok, label: JSON.stringify({ seen, findings: clean }) };
        } finally {
          await store.cleanup();
        }
      }

      const probe = async (): Promise<CallPoint[]> => (await runCase(() => ({ kind: 'pass' }))).calls;

      // One Redis ingests a flush in one atomic call (Engine.recordAndApply): no await point of A's
      // ingest to run B at, and none to fail at.
      const oneCall = (points: CallPoint[]): boolean => 'messages' in s.change && points.length === 0;

      it(`${s.name}: B runs at every await point of A`, async (ctx) => {
        const points = await probe();
        if (oneCall(points)) return ctx.skip();
        expect(points.length).toBeGreaterThan(1);
        for (const point of points) {
          const r = await runCase(() => ({ kind: 'pass' }), point);
          // Else the calls shifted since the probe and this case silently ran A and B one after the other.
          expect(r.held, `A was held ${point.phase} ${point.method} #${point.index} while B ran`).toBe(true);
          expect(r.ok, `B ran with A held ${point.phase} ${point.method} #${point.index}: ${r.label}`).toBe(true);
        }
      });

      it(`${s.name}: A fails at every call (before, after, halfway); B runs; A's retry completes it`, async (ctx) => {
        const all = await probe();
        if (oneCall(all)) return ctx.skip();
        const points = all.filter((p) => p.phase === 'before');
        for (const p of points) {
          for (const { fault, at, control, injected } of faultsAt(p)) {
            const r = await runCase(control());
            expect(injected(), `fault ${fault.kind} at ${at.phase} ${at.method} #${at.index} was reached`).toBe(true);
            expect(r.ok, `A failed (${fault.kind}) ${at.phase} ${at.method} #${at.index}, B ran, A retried: ${r.label}`).toBe(true);
          }
        }
      });
    }
  });
}
