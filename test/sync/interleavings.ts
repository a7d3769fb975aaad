import { describe, expect, it } from 'vitest';
import { RedpointError } from '../../protocol/errors.js';
import type { ConvState, Cursor, MessageEvent, NotificationLevel, UnreadSummary } from '../../protocol/types.js';
import type { Engine } from '../../server/engine/engine.js';
import { ConversationCap } from '../../server/sync/conversation-cap.js';
import { SyncService } from '../../server/sync/sync-service.js';
import { clientSummary } from '../helpers/client-view.js';
import { isEqual } from '../helpers/equal.js';
import { Model, type ModelSummary } from '../http/model.js';
import { type CallPoint, type Control, controlledEngine, faultsAt, InjectedFault } from './controlled-engine.js';

/**
 * Two sync services (two server processes) on one store, made to interleave at every await
 * point of one operation, and made to fail at every store call of it followed by a retry —
 * systematically, not by chance. After each run every user must show what the reference model
 * (test/http/model.ts, written from the specification) computes for one order of the two
 * operations: the outcome must be linearizable, whichever process ran what in between.
 */

type Step =
  | { members: string; add?: string[]; remove?: string[]; category?: string }
  | { messages: MessageEvent[] }
  /** PROTOCOL.md "Threads": `uid` follows the thread off message `root` of `follow`. */
  | { follow: string; root: number; uid: string }
  /** PUT /v1/users/:uid/settings {mutedMentions} (PROTOCOL.md "Notification levels"). */
  | { settings: string; mutedMentions: boolean }
  /** `uid`'s notification level of `conv` (PATCH .../conversations/:conv {level}). */
  | { level: NotificationLevel; uid: string; conv: string };

interface Scenario {
  name: string;
  threshold: number;
  /** MAX_CONVERSATIONS_PER_USER (absent: no cap). */
  cap?: number;
  /** Threads followed per conversation (absent: LIMITS.threadsFollowedPerConversation). */
  threadCap?: number;
  setup: Step[];
  /** The operation whose await points are controlled (process A). */
  change: Step;
  /** What the other process (B) does at the controlled point. */
  concurrent: Step;
  /** Applied after both, to show each user's record agrees with the membership. */
  after: Step[];
  users: string[];
}

const m = (conv: string, seq: number, sender: string, mentions?: string[]): MessageEvent => ({ conv, seq, sender, ...(mentions ? { mentions } : {}) });
/** A message of topic `topic` of `conv` (PROTOCOL.md "Topics"): its seq is the topic's own. */
const tm = (conv: string, topic: string, seq: number, sender: string, mentions?: string[]): MessageEvent => ({ ...m(conv, seq, sender, mentions), topic });

/** Reply `seq` of the thread off message `root` of `conv` (PROTOCOL.md "Threads"): its seq is the thread's own. */
const rm = (conv: string, root: number, seq: number, sender: string, mentions?: string[], rootSender?: string): MessageEvent => ({
  ...m(conv, seq, sender, mentions),
  thread: root,
  ...(rootSender !== undefined ? { rootSender } : {}),
});

/** u may follow 2 threads of g and follows one already (root 1 of roots 1-3, a's). */
const ONE_THREAD_LEFT = {
  threadCap: 2,
  setup: [{ members: 'g', add: ['a', 'u'] }, { messages: [m('g', 1, 'a'), m('g', 2, 'a'), m('g', 3, 'a')] }, { follow: 'g', root: 1, uid: 'u' }],
} satisfies Pick<Scenario, 'threadCap' | 'setup'>;

export const SCENARIOS: Scenario[] = [
  {
    name: 'a join while a message is ingested',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', add: ['u'] },
    concurrent: { messages: [m('g', 2, 'a', ['u', 'b'])] },
    after: [{ messages: [m('g', 3, 'b')] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: 'a message ingested while a join runs (the ingest is the controlled side)',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }],
    change: { messages: [m('g', 2, 'a', ['u'])] },
    concurrent: { members: 'g', add: ['u'] },
    after: [{ messages: [m('g', 3, 'b', ['u'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: 'a leave while a message is ingested',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'u'] }, { messages: [m('g', 1, 'a', ['u'])] }],
    change: { members: 'g', remove: ['u'] },
    concurrent: { messages: [m('g', 2, 'b', ['u'])] },
    after: [{ messages: [m('g', 3, 'a', ['u'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: 'a rejoin while a message is ingested',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'u'] }, { messages: [m('g', 1, 'a')] }, { members: 'g', remove: ['u'] }, { messages: [m('g', 2, 'a')] }],
    change: { members: 'g', add: ['u'] },
    concurrent: { messages: [m('g', 3, 'b', ['u'])] },
    after: [{ messages: [m('g', 4, 'a')] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: 'a switch to read diffusion while a message is ingested',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'c'] }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', add: ['d'] },
    concurrent: { messages: [m('g', 2, 'b', ['c', 'd'])] },
    after: [{ messages: [m('g', 3, 'a', ['d'])] }],
    users: ['a', 'b', 'c', 'd'],
  },
  {
    name: 'a switch back to write diffusion while a message is ingested',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'c', 'd'] }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', remove: ['d'] },
    concurrent: { messages: [m('g', 2, 'a', ['b'])] },
    after: [{ messages: [m('g', 3, 'c')] }],
    users: ['a', 'b', 'c', 'd'],
  },
  {
    name: 'a category change while a message is ingested',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'], category: 'group' }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', category: 'team' },
    concurrent: { messages: [m('g', 2, 'b')] },
    after: [{ messages: [m('g', 3, 'b')] }],
    users: ['a', 'b'],
  },
  {
    name: 'two processes add members of one group at once, crossing the threshold together',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', add: ['u'] },
    concurrent: { members: 'g', add: ['v'] },
    after: [{ messages: [m('g', 2, 'a', ['u', 'v'])] }],
    users: ['a', 'b', 'u', 'v'],
  },
  {
    name: 'one process adds a user while another removes it',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', add: ['u'] },
    concurrent: { members: 'g', remove: ['u'] },
    after: [{ messages: [m('g', 2, 'a', ['u'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: "a topic's first message while a member joins",
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }],
    change: { messages: [tm('g', 't', 1, 'a', ['u', 'b'])] },
    concurrent: { members: 'g', add: ['u'] },
    after: [{ messages: [tm('g', 't', 2, 'b', ['u']), m('g', 2, 'b')] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: "a join while a topic's first message is ingested",
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'] }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', add: ['u'] },
    concurrent: { messages: [tm('g', 't', 1, 'a', ['u', 'b'])] },
    after: [{ messages: [tm('g', 't', 2, 'b', ['u'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: "a topic's first message while a member leaves",
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'u'] }, { messages: [m('g', 1, 'a', ['u'])] }],
    change: { messages: [tm('g', 't', 1, 'a', ['u'])] },
    concurrent: { members: 'g', remove: ['u'] },
    after: [{ messages: [tm('g', 't', 2, 'b', ['u'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: "a leave while a topic's first message is ingested",
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'u'] }, { messages: [tm('g', 'old', 1, 'a', ['u'])] }],
    change: { members: 'g', remove: ['u'] },
    concurrent: { messages: [tm('g', 't', 1, 'b', ['u'])] },
    after: [{ messages: [tm('g', 't', 2, 'a', ['u']), tm('g', 'old', 2, 'b', ['u'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: "a topic's first message while the conversation switches to read diffusion and changes category",
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'c'], category: 'group' }],
    change: { messages: [tm('g', 't', 1, 'a', ['d'])] },
    concurrent: { members: 'g', add: ['d'], category: 'team' },
    after: [{ messages: [tm('g', 't', 2, 'b', ['d', 'c'])] }],
    users: ['a', 'b', 'c', 'd'],
  },
  {
    name: 'a follow of a thread while the follower leaves the conversation',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'u'] }, { messages: [m('g', 1, 'a')] }, { messages: [rm('g', 1, 1, 'a', ['b'])] }],
    change: { follow: 'g', root: 1, uid: 'u' },
    concurrent: { members: 'g', remove: ['u'] },
    after: [{ messages: [rm('g', 1, 2, 'b', ['a'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: 'a leave of the conversation while its member follows a thread',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'u'] }, { messages: [m('g', 1, 'a')] }, { messages: [rm('g', 1, 1, 'a', ['u'])] }],
    change: { members: 'g', remove: ['u'] },
    concurrent: { follow: 'g', root: 2, uid: 'u' },
    after: [{ messages: [rm('g', 1, 2, 'b'), rm('g', 2, 1, 'a')] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: "a reply's implicit follow while the follower leaves the conversation",
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'u'] }, { messages: [m('g', 1, 'a')] }],
    change: { messages: [rm('g', 1, 1, 'b', ['u'], 'a')] },
    concurrent: { members: 'g', remove: ['u'] },
    after: [{ messages: [rm('g', 1, 2, 'a', ['b'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: "a leave of the conversation while a reply's implicit follow runs",
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b', 'u'] }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', remove: ['u'] },
    concurrent: { messages: [rm('g', 1, 1, 'b', ['u'], 'a')] },
    after: [{ messages: [rm('g', 1, 2, 'a', ['b'])] }],
    users: ['a', 'b', 'u'],
  },
  {
    name: 'a thread created (its first reply) while the conversation changes category',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'], category: 'group' }, { messages: [m('g', 1, 'a')] }],
    // One follower (b, the root's sender and the replier): no second follow reads the category later.
    change: { messages: [rm('g', 1, 1, 'b', undefined, 'b')] },
    concurrent: { members: 'g', category: 'team' },
    // Not a reply: a reply's opening of the thread would repair a category the steps got wrong.
    after: [{ messages: [m('g', 2, 'a', ['b'])] }],
    users: ['a', 'b'],
  },
  {
    name: 'a category change while a thread is created (its first reply)',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'b'], category: 'group' }, { messages: [m('g', 1, 'a')] }],
    change: { members: 'g', category: 'team' },
    concurrent: { messages: [rm('g', 1, 1, 'b', undefined, 'b')] },
    // Not a reply: a reply's opening of the thread would repair a category the steps got wrong.
    after: [{ messages: [m('g', 2, 'a', ['b'])] }],
    users: ['a', 'b'],
  },
  {
    name: 'two follows of one user with room for one thread, in two processes',
    threshold: 3,
    ...ONE_THREAD_LEFT,
    change: { follow: 'g', root: 2, uid: 'u' },
    concurrent: { follow: 'g', root: 3, uid: 'u' },
    after: [{ messages: [rm('g', 2, 1, 'a'), rm('g', 3, 1, 'a')] }],
    users: ['a', 'u'],
  },
  {
    name: "a reply's implicit follow with room for one thread while its follower follows another",
    threshold: 3,
    ...ONE_THREAD_LEFT,
    change: { messages: [rm('g', 2, 1, 'a', ['u'])] },
    concurrent: { follow: 'g', root: 3, uid: 'u' },
    after: [{ messages: [rm('g', 2, 2, 'a'), rm('g', 3, 1, 'a')] }],
    users: ['a', 'u'],
  },
  // PROTOCOL.md "Notification levels": mutedMentions is written, then the user's stream restarts.
  {
    name: 'mutedMentions turned on while a mention in a conversation the user muted is ingested',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'u'] }, { level: 'none', uid: 'u', conv: 'g' }, { messages: [m('g', 1, 'a', ['u'])] }],
    change: { settings: 'u', mutedMentions: true },
    concurrent: { messages: [m('g', 2, 'a', ['u'])] },
    after: [{ messages: [m('g', 3, 'a')] }],
    users: ['a', 'u'],
  },
  {
    name: 'a mention in a conversation the user muted ingested while mutedMentions is turned on (the ingest is the controlled side)',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'u'] }, { level: 'none', uid: 'u', conv: 'g' }, { messages: [m('g', 1, 'a')] }],
    change: { messages: [m('g', 2, 'a', ['u'])] },
    concurrent: { settings: 'u', mutedMentions: true },
    after: [{ messages: [m('g', 3, 'a')] }],
    users: ['a', 'u'],
  },
  {
    name: 'mutedMentions turned on in one process while turned off in another',
    threshold: 3,
    setup: [
      { members: 'g', add: ['a', 'u'] },
      { level: 'none', uid: 'u', conv: 'g' },
      { messages: [m('g', 1, 'a', ['u'])] },
      { settings: 'u', mutedMentions: true },
    ],
    change: { settings: 'u', mutedMentions: false },
    concurrent: { settings: 'u', mutedMentions: true },
    after: [{ messages: [m('g', 2, 'a', ['u'])] }],
    users: ['u'],
  },
  {
    name: 'mutedMentions turned on while the user mutes the conversation in another process',
    threshold: 3,
    setup: [{ members: 'g', add: ['a', 'u'] }, { messages: [m('g', 1, 'a', ['u']), m('g', 2, 'a')] }],
    change: { settings: 'u', mutedMentions: true },
    concurrent: { level: 'none', uid: 'u', conv: 'g' },
    after: [{ messages: [m('g', 3, 'a', ['u'])] }],
    users: ['u'],
  },
  {
    name: 'two joins of one user with room for one, in two processes',
    threshold: 3,
    cap: 2,
    setup: [{ members: 'g1', add: ['u'] }, { messages: [m('g1', 1, 'u')] }],
    change: { members: 'g2', add: ['u', 'a'] },
    concurrent: { members: 'g3', add: ['u', 'b'] },
    after: [{ messages: [m('g2', 1, 'a', ['u']), m('g3', 1, 'b', ['u'])] }],
    users: ['u', 'a', 'b'],
  },
  {
    name: 'a join of a user at the cap while another process removes it elsewhere',
    threshold: 3,
    cap: 2,
    setup: [
      { members: 'g1', add: ['u'] },
      { members: 'g2', add: ['u', 'a'] },
    ],
    change: { members: 'g3', add: ['u', 'a'] },
    concurrent: { members: 'g1', remove: ['u'] },
    after: [{ messages: [m('g3', 1, 'a', ['u'])] }],
    users: ['u', 'a'],
  },
];

async function run(sync: SyncService, step: Step): Promise<void> {
  if ('members' in step) {
    // A user left out at the cap is an answer of the specification (the model has it), not a failure.
    await sync
      .changeMembers(step.members, {
        add: step.add ?? [],
        remove: step.remove ?? [],
        ...(step.category !== undefined ? { category: step.category } : {}),
      })
      .catch((err: unknown) => {
        if (!(err instanceof RedpointError && err.code === 'conversation_limit')) throw err;
      });
  } else if ('follow' in step) {
    // A follower who is not a member (any more), or at the cap, is an answer of the specification, not a failure.
    await sync.followThread(step.uid, step.follow, step.root).catch((err: unknown) => {
      if (!(err instanceof RedpointError && (err.code === 'not_a_member' || err.code === 'limit_exceeded'))) throw err;
    });
  } else if ('settings' in step) {
    await sync.setUserSettings(step.settings, { mutedMentions: step.mutedMentions });
  } else if ('level' in step) {
    await sync.updateSettings(step.uid, step.conv, { level: step.level });
  } else {
    await sync.postMessages(step.messages);
  }
}

function model(s: Scenario, steps: Step[]): Model {
  const model = new Model(s.threshold, s.cap, s.threadCap);
  for (const step of steps) {
    if ('members' in step) model.changeMembers(step.members, step.add ?? [], step.remove ?? [], step.category);
    else if ('follow' in step) model.follow(step.uid, step.follow, step.root);
    else if ('settings' in step) model.setMutedMentions(step.settings, step.mutedMentions);
    else if ('level' in step) model.updateSettings(step.uid, step.conv, { level: step.level });
    else model.postMessages(step.messages);
  }
  return model;
}

/** What a user shows, seen two ways: the unread summary, and a client that pulled from scratch. */
export async function shown(sync: SyncService, uid: string): Promise<{ summary: ModelSummary; pulled: ModelSummary }> {
  const { uid: _u, epoch: _e, version: _v, ...summary } = await sync.unread(uid);
  const held = new Map<string, ConvState>();
  let heads: Record<string, number> = {};
  let since: Cursor | null = null;
  let mutedMentions = false;
  for (let page = 0; page < 100; page++) {
    const p = await sync.pull(uid, since, 3);
    mutedMentions = p.mutedMentions === true;
    if (p.snapshot) {
      held.clear();
      for (const s of p.snapshot.convs) held.set(s.conv, s);
    }
    for (const e of p.entries) {
      if (e.state) held.set(e.conv, e.state);
      else held.delete(e.conv);
    }
    heads = p.heads;
    since = { epoch: p.epoch, version: p.version };
    if (!p.more) break;
  }
  const { uid: _u2, epoch: _e2, version: _v2, ...pulled }: UnreadSummary = clientSummary(uid, '', 0, held.values(), heads, { mutedMentions });
  return { summary, pulled };
}

export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * The suite over one kind of store. `fresh` gives an empty store (its own key prefix) for each
 * run; both services of a run share it.
 */
export function interleavingSuite(name: string, fresh: () => Promise<{ engine: Engine; cleanup(): Promise<void> }>): void {
  describe(`two processes, systematic interleavings and faults: ${name}`, () => {
    for (const s of SCENARIOS) {
      const both = (first: Step, second: Step): Step[] => [...s.setup, first, second, ...s.after];
      const orders = [both(s.change, s.concurrent), both(s.concurrent, s.change)];
      const service = (engine: Engine): SyncService =>
        new SyncService(engine, {
          largeGroupThreshold: s.threshold,
          ...(s.cap ? { conversationCap: new ConversationCap(engine, s.cap) } : {}),
          ...(s.threadCap ? { threadFollowCap: s.threadCap } : {}),
        });

      /**
       * One run: setup, then A's step with `control` on A's store calls; B's step runs once A is
       * held at `hold` (or once A has finished or failed). A failed step is retried (without
       * faults) after B's. Returns A's store calls and what every user shows at the end.
       */
      async function runCase(
        control: (p: CallPoint) => Control,
        hold?: CallPoint,
      ): Promise<{ calls: CallPoint[]; held: boolean; seen: { summary: ModelSummary; pulled: ModelSummary }[] }> {
        const store = await fresh();
        try {
          const plain = service(store.engine);
          for (const step of s.setup) await run(plain, step);
          const reached = deferred();
          const release = deferred();
          let held = false;
          const { engine, calls } = controlledEngine(store.engine, (p) => {
            if (hold && p.index === hold.index && p.phase === hold.phase) {
              held = true;
              reached.resolve();
              return { kind: 'hold', release: release.promise };
            }
            return control(p);
          });
          const changing = run(service(engine), s.change).then(
            () => undefined,
            (err: unknown) => err,
          );
          await Promise.race([reached.promise, changing]);
          await run(plain, s.concurrent);
          release.resolve();
          const failure = await changing;
          if (failure !== undefined) {
            if (!(failure instanceof InjectedFault)) throw failure;
            await run(plain, s.change);
          }
          for (const step of s.after) await run(plain, step);
          return { calls, held, seen: await Promise.all(s.users.map((uid) => shown(plain, uid))) };
        } finally {
          await store.cleanup();
        }
      }

      /** Every user equals the model of one order of A's and B's steps (the same order for all), seen both ways. */
      function expectLinearizable(seen: { summary: ModelSummary; pulled: ModelSummary }[], label: string): void {
        const models = orders.map((steps) => model(s, steps));
        const ok = models.some((mdl) => s.users.every((uid, i) => isEqual(seen[i]?.summary, mdl.unread(uid)) && isEqual(seen[i]?.pulled, mdl.unread(uid))));
        if (ok) return;
        const want = models[0];
        expect(
          { label, users: Object.fromEntries(s.users.map((uid, i) => [uid, seen[i]])) },
          'neither order of the two steps gives this (the diff is against A then B)',
        ).toEqual({ label, users: Object.fromEntries(s.users.map((uid) => [uid, { summary: want?.unread(uid), pulled: want?.unread(uid) }])) });
      }

      const probe = (): Promise<CallPoint[]> => runCase(() => ({ kind: 'pass' })).then((r) => r.calls);

      it(`${s.name}: B runs at every await point of A`, async () => {
        const points = await probe();
        expect(points.length).toBeGreaterThan(1);
        for (const point of points) {
          const { seen, held } = await runCase(() => ({ kind: 'pass' }), point);
          // Else the calls shifted since the probe and this case silently ran A and B one after the other.
          expect(held, `A was held ${point.phase} ${point.method} #${point.index} while B ran`).toBe(true);
          expectLinearizable(seen, `B ran with A held ${point.phase} ${point.method} #${point.index}`);
        }
      });

      it(`${s.name}: A fails at every store call (before, after, halfway); B runs; A's retry completes it`, async () => {
        const points = (await probe()).filter((p) => p.phase === 'before');
        for (const p of points) {
          for (const { fault, at, control, injected } of faultsAt(p)) {
            const { seen } = await runCase(control());
            expect(injected(), `fault ${fault.kind} at ${at.phase} ${at.method} #${at.index} was reached`).toBe(true);
            expectLinearizable(seen, `A failed (${fault.kind}) ${at.phase} ${at.method} #${at.index}, B ran, A retried`);
          }
        }
      });
    }
  });
}
