import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Action, countsScenarioArb, type Scenario, settingsScenarioArb, threadsScenarioArb } from '../http/actions.js';
import { type CoverageKey, coverage, runScenario, runUntilExercised } from '../http/scenario.js';
import { durableStack } from './stack.js';

/**
 * The HTTP property test (test/http/) with the durable tier on and the store lost at random
 * points: random membership changes, messages, duplicates and reorders, reads, deletes and
 * settings through a real server, and now and then — once PostgreSQL has every change — Redis
 * flushed or replaced by an empty server. Every check after that must still equal the model:
 * unread, totals, sync from scratch and from old cursors (which get a snapshot: a new epoch).
 * The actions include issue 44's: "unread from here" (a read position lowered, then restored
 * across a wipe), read receipts (one-to-one chats' peerReadSeq) and their `shareReads` setting,
 * and threads' (PROTOCOL.md "Threads"): replies, follows and unfollows, thread rows' reads and
 * settings, each of which may be the first touch of a conversation or thread the wipe lost, and
 * flips of the user's `mutedMentions` setting (PROTOCOL.md "Notification levels"), whose badge
 * must still count a muted conversation's mentions once Redis lost the setting.
 */
const NUM_RUNS = Number(process.env.REDPOINT_DURABLE_PROPERTY_RUNS ?? 25);
const SEED = process.env.REDPOINT_DURABLE_PROPERTY_SEED;
// With the seed, the `path` a failure printed replays that one scenario.
const PATH = process.env.REDPOINT_DURABLE_PROPERTY_PATH;
// No shrinking: a run here races the background drainer, so a failure may not repeat exactly,
// and shrinking one (each attempt with wipes and drains) outlasts any test timeout; the first
// counterexample, with its seed, is the report.
// The model applies reads as given: MAX_READ_AHEAD's cap is off (test/http/property.test.ts).
const CONFIG = { largeGroupThreshold: 3, snapshotEvery: 5, streamMaxLen: 10, config: { maxReadAhead: 0, maxSeqJump: 0 } };

/** `base`'s scenarios with 1–3 wipes inserted at random points (after their setup). */
const withWipes = (base: fc.Arbitrary<Scenario>): fc.Arbitrary<Scenario> =>
  fc
    .tuple(base, fc.array(fc.record({ at: fc.nat(), how: fc.constantFrom<'flushall' | 'empty'>('flushall', 'empty') }), { minLength: 1, maxLength: 3 }))
    .map(([scenario, wipes]) => {
      const actions: Action[] = [...scenario.actions];
      for (const { at, how } of wipes) actions.splice(1 + (at % actions.length), 0, { t: 'wipe', how });
      return { ...scenario, actions };
    });
/** The scenarios the FOUND seeds were found with, unless one names its own (their seeds replay them exactly). */
const durableScenarioArb = withWipes(countsScenarioArb(1));
/** With thread replies, follows and thread rows' reads and settings too (PROTOCOL.md "Threads"). */
const durableThreadsScenarioArb = withWipes(threadsScenarioArb(1));
/**
 * The random runs', the HTTP property test's scenarios: with topics' messages and topic rows'
 * reads and settings (PROTOCOL.md "Topics"), and flips of the users' `mutedMentions` setting
 * (PROTOCOL.md "Notification levels"). The flips (and a muted mention's scene) are drawn after
 * the rest, and the FOUND seeds replay their own arbitraries above: their scenarios stay as found.
 */
const durableSettingsScenarioArb = withWipes(settingsScenarioArb(1));

/** What the random runs must have exercised (a coverage key, and what it means). */
const EXERCISED = {
  loweringsAcrossWipe: 'a lowered read position across a wipe',
  positionsAcrossWipe: "a one-to-one chat's position across a wipe",
  threadReplies: 'thread replies',
  follows: 'explicit follows',
  topicMessages: "topics' messages",
  mutedMentionsAcrossWipe: 'mutedMentions on, moving a badge, across a wipe',
} as const satisfies Partial<Record<CoverageKey, string>>;
type Exercised = keyof typeof EXERCISED;
/** Batches of fresh scenarios run at most when a draw missed something EXERCISED names. */
const EXTRA_BATCHES = 3;

describe('durable tier: the model holds across Redis losing everything', () => {
  const stack = durableStack('property', [{ ...CONFIG, durable: { persistIntervalMs: 20 } }]);

  const wipe = async (how: 'flushall' | 'empty'): Promise<void> => {
    const durable = stack.server.durable;
    if (!durable) throw new Error('no durable tier');
    // What the tier promises is bounded by its lag: once drained, nothing acknowledged is lost.
    await durable.persister.drainAll(Date.now() + 30_000);
    if (how === 'flushall') await stack.admin.flushall();
    else {
      // redis-server without persistence comes back empty: a replaced node, a restart without AOF.
      await stack.redis.restart();
      const deadline = Date.now() + 30_000;
      while (!(await stack.server.engine.ready())) {
        if (Date.now() > deadline) throw new Error('the engine did not reconnect to the new Redis');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };

  // Counterexamples found by the random runs, replayed on every run (seed and path pin the scenario).
  // The rare failure noted before (~1 in 300-500 runs: a user's /unread after a wipe lacking a
  // conversation whose membership changed just before it) did not come back in 6,150 runs of this
  // server code, in batches of 50 on a machine at load 20-40 (bench/reports/mutation.md).
  const FOUND = [
    { seed: -1326661010, path: '226', what: 'deleted, left, joined again, then Redis lost: deletedSeq must start over with the join' },
    // The wipe's drain and the server's own drainer wrote the same heads in different orders:
    // a deadlock, and the heads' upsert was not run again (pipeline.test.ts holds it exactly).
    { seed: -1300534207, path: '9', what: "two drainers' heads crossing: a deadlock's victim is written again" },
    // After the merges a pull read a read-diffused conversation's heads and its last activity at
    // once: the second read found it not yet restored by the first, and `at` was missing.
    { seed: -2123490147, path: '24', what: 'a sync the first read after a wipe: a read-diffused conversation keeps its last activity' },
    // With counts in the runs: the model gave a late read-diffused @all only to members below
    // it on arrival; the server counts it at read time (after an unread-from below it too).
    { seed: -867595856, path: '78', what: 'a late @all in a read-diffused group, then an unread-from below it, across a wipe' },
    // With threads in the runs: a follow asked Redis alone whether the user was a member of the
    // conversation and of the thread (engine joinTag), so after a wipe a follower's repeated
    // follow answered `changed: true` (a member's first follow, 403 not_a_member).
    {
      seed: 878023004,
      path: '0',
      what: "a follow after a wipe, the thread not yet restored: the follower's follow changes nothing",
      scenarios: durableThreadsScenarioArb,
    },
  ];
  for (const found of FOUND) {
    it(`found: ${found.what} (seed ${found.seed})`, async () => {
      await fc.assert(
        fc.asyncProperty(found.scenarios ?? durableScenarioArb, async (scenario) => {
          await runScenario(stack.server, { ...scenario, server: 0, protoNames: false }, { wipe });
        }),
        { seed: found.seed, path: found.path, numRuns: 1, endOnFailure: true },
      );
    }, 60_000);
  }

  it('example: a read position lowered by "unread from here", peers\' positions and shareReads off, each across a wipe', async () => {
    const scenario: Scenario = {
      server: 0,
      actions: [
        { t: 'members', conv: 0, add: [0, 1], remove: [] },
        { t: 'members', conv: 1, add: [1, 2], remove: [] },
        ...[0, 1].flatMap((conv): Action[] => [
          { t: 'msg', conv, sender: 1, pick: false, mentions: [0, 2], hold: false, gap: 0 },
          { t: 'msg', conv, sender: 1, pick: false, mentions: [], hold: false, gap: 0 },
          { t: 'msg', conv, sender: 1, pick: false, mentions: [], hold: false, gap: 0 },
        ]),
        { t: 'read', user: 0, conv: 0, pick: false, all: true, permille: 0, jwt: false },
        { t: 'read', user: 1, conv: 0, pick: false, all: true, permille: 0, jwt: false },
        { t: 'read', user: 2, conv: 1, pick: false, all: true, permille: 0, jwt: false },
        { t: 'read', user: 1, conv: 1, pick: false, all: true, permille: 0, jwt: false },
        // Lowered below what was read (the mention at seq 1 counts again), then the store is lost.
        { t: 'unread', user: 0, conv: 0, pick: false, permille: 1, gen: 'next', jwt: false },
        { t: 'shareReads', user: 2, share: false, jwt: true },
        { t: 'wipe', how: 'flushall' },
        { t: 'check', limit: 2 },
        // A device that had not seen the lowering reads in the older generation: nothing moves.
        { t: 'read', user: 0, conv: 0, pick: false, all: true, permille: 0, jwt: false, gen: 'older' },
        { t: 'wipe', how: 'empty' },
        { t: 'check', limit: 2 },
      ],
      finalLimits: [2, 2, 2, 2, 2],
    };
    const before = structuredClone(coverage);
    await runScenario(stack.server, scenario, { wipe });
    expect(coverage.loweringsAcrossWipe - before.loweringsAcrossWipe).toBe(1);
    expect(coverage.positionsAcrossWipe - before.positionsAcrossWipe).toBe(2);
  }, 120_000);

  // Found by the random runs with mutedMentions flips (seed -1232640483, path 399), though no flip
  // is needed: ingest_flush.lua left out a member's mention of a seq the read-diffused group held
  // recalled already, but its reply did not say so, and a member Redis lost (restored, then given
  // the ops derived from that reply) kept the mention.
  it('example: a recall before its message in a read-diffused group, the mentioned members restored after a wipe', async () => {
    const scenario: Scenario = {
      server: 0,
      actions: [
        { t: 'members', conv: 3, add: [0, 2, 3, 4], remove: [], category: 'group' },
        { t: 'wipe', how: 'empty' },
        { t: 'msg', conv: 3, sender: 1, pick: true, mentions: [], hold: false, gap: 0, recalls: [2] },
        { t: 'msg', conv: 3, sender: 1, pick: true, mentions: [0, 3], hold: false, gap: 1 },
        { t: 'check', limit: 2 },
      ],
      finalLimits: [2, 2, 2, 2, 2],
    };
    await runScenario(stack.server, scenario, { wipe });
  }, 120_000);

  it(
    'random scenarios with wipes converge to the model',
    async () => {
      const wipesBefore = coverage.wipes;
      const batch = (runs = NUM_RUNS): Promise<void> =>
        fc.assert(
          fc.asyncProperty(durableSettingsScenarioArb, async (scenario) => {
            await runScenario(stack.server, { ...scenario, server: 0, protoNames: false }, { wipe });
          }),
          {
            numRuns: runs,
            endOnFailure: PATH === undefined || process.env.REDPOINT_DURABLE_PROPERTY_SHRINK === undefined,
            ...(SEED !== undefined ? { seed: Number(SEED) } : {}),
            ...(PATH !== undefined ? { path: PATH } : {}),
          },
        );
      // Not vacuous: issue 44's registers crossed a wipe (a read position lowered by "unread from
      // here": the (gen, seq) register restored, not the higher seq; read receipts' positions),
      // and issue 43's model was driven. The rarest (a lowering across a wipe) was missing from
      // one draw of 25 runs in about six, failing CI by chance: a draw that missed one is followed
      // by fresh batches (none with a seed, which would replay the same draw).
      const claimed = NUM_RUNS >= 25 ? (Object.keys(EXERCISED) as Exercised[]) : [];
      const moved = await runUntilExercised(claimed, batch, {
        extraRuns: NUM_RUNS,
        extraBatches: SEED === undefined ? EXTRA_BATCHES : 0,
        label: 'durable property',
      });
      expect(coverage.wipes - wipesBefore).toBeGreaterThanOrEqual(NUM_RUNS);
      for (const key of claimed) expect(moved[key], EXERCISED[key]).toBeGreaterThan(0);
    },
    Math.max(300_000, NUM_RUNS * 8_000 * (1 + EXTRA_BATCHES)),
  );
});
