import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalToolbox } from '../../server/admin/toolbox.js';
import { adminOf } from '../../server/engine/admin.js';
import type { EngineKind } from '../../server/engine/engine.js';
import { walk } from '../admin/toolbox-suite.js';
import { type RedisServer, startRedisServer } from '../helpers/redis-server.js';
import { startTestServer, type TestServer, type TestServerOptions } from '../helpers/test-server.js';
import { type Scenario, settingsScenarioArb } from './actions.js';
import { type CoverageKey, runScenario, runUntilExercised, takeCoverage } from './scenario.js';

/**
 * Random sequences of membership changes (crossing the large-group threshold both ways),
 * messages, duplicate and reordered redeliveries, reads (some made in a stale read generation),
 * "unread from here" (new generations, retries, none), deletes and settings, through the HTTP
 * API of a real server, compared with the reference model after the run and at random points.
 * Runs for both engines; the Redis one starts its own redis-server and FAILS when it cannot.
 */
// REDPOINT_PROPERTY_ENGINES=memory runs one (mutation testing: scripts/mutation/).
const ENGINES = (process.env.REDPOINT_PROPERTY_ENGINES?.split(',') ?? ['memory', 'redis']) as EngineKind[];

/**
 * The model applies every read as given, far ahead of the head included (reads may overtake
 * ingest); MAX_READ_AHEAD's cap is off here and has its own tests (test/http/read-ahead.test.ts).
 * So is MAX_SEQ_JUMP: the model takes any seq (gaps of 2^40 included), the guard has its own
 * (test/sync/seq-guard.test.ts).
 */
const NO_READ_CAP = { maxReadAhead: 0, maxSeqJump: 0 };

/**
 * Each scenario picks one of these servers (5 users, so groups go large at 4 or 3 members and
 * back). Small snapshot intervals and history so runs cross snapshots and trimming; the second
 * keeps less history than a snapshot interval, so a cursor just behind the trimmed base must
 * still be reset (not only cursors "far behind").
 */
const CONFIGS: Omit<TestServerOptions, 'engine' | 'redis'>[] = [
  { largeGroupThreshold: 3, snapshotEvery: 5, streamMaxLen: 10, config: NO_READ_CAP },
  { largeGroupThreshold: 2, snapshotEvery: 12, streamMaxLen: 10, config: NO_READ_CAP },
  { largeGroupThreshold: 3, snapshotEvery: 2, streamMaxLen: 10, config: NO_READ_CAP },
];

const NUM_RUNS = Number(process.env.REDPOINT_PROPERTY_RUNS ?? 200);
const SEED = process.env.REDPOINT_PROPERTY_SEED;
/** With the seed, replays one run (fast-check's `path` from a failure report) instead of all before it. */
const PATH = process.env.REDPOINT_PROPERTY_PATH;
/**
 * A run that hangs fails with its seed and path instead of outlasting the test's budget silently
 * (a run takes a second or two; a loaded CI machine, ten times that).
 */
const RUN_TIMEOUT_MS = 60_000;

/**
 * Counterexamples found by the property, kept as fixed cases (the shrunk scenario, which does not
 * depend on the generator staying the same).
 */
const REGRESSIONS: { name: string; scenario: Scenario }[] = [
  {
    // The model gave a read-diffused @all to members above their readSeq when it arrived; the
    // server counts it at read time (PROTOCOL.md "@all"), so an @all that arrived late, below a
    // member's readSeq, counts once an "unread from here" sets the position below it (seeds
    // 654570987 path 143 and 2132345603 path 164, memory engine, CI of 2026-12-06).
    name: 'a late @all in a read-diffused group counts after an unread-from below it',
    scenario: {
      server: 0,
      actions: [
        { t: 'members', conv: 2, add: [4], remove: [], category: 'private' },
        { t: 'members', conv: 2, add: [0, 1, 3], remove: [] },
        { t: 'msg', conv: 2, sender: 0, pick: true, mentions: [], hold: true, gap: 0, everyone: true },
        { t: 'msg', conv: 2, sender: 2, pick: true, mentions: [], hold: false, gap: 0, everyone: true },
        { t: 'batch', picks: [], includeHeld: true, single: false, shuffle: 0 },
        { t: 'unread', user: 2, conv: 2, pick: true, permille: 0, gen: 'next', jwt: false },
        { t: 'check', limit: 1 },
      ],
      finalLimits: [1, 1, 1, 1, 1],
    },
  },
  {
    // membership.ts skipped every uid listed in `add` when rewriting members after a category
    // change, but `add` may list members already in: their join is a no-op, so they kept the old
    // category (found by the property on both engines, seeds 1659775826 / 91998680).
    name: 're-adding an existing member while the category changes updates its category',
    scenario: {
      server: 0,
      actions: [
        { t: 'members', conv: 0, add: [0, 1, 2, 3, 4], remove: [] },
        { t: 'members', conv: 0, add: [4], remove: [], category: 'private' },
        { t: 'sync', user: 4, limit: 1, fresh: false },
      ],
      finalLimits: [1, 1, 1, 1, 1],
    },
  },
  {
    // Same skip, mode switch: members re-listed in `add` kept the old diffusion mode, so after the
    // group went large their records no longer followed the conversation head.
    name: 're-adding existing members while the group crosses the threshold switches their mode',
    scenario: {
      server: 0,
      actions: [
        { t: 'members', conv: 0, add: [0, 1, 2], remove: [] },
        { t: 'msg', conv: 0, sender: 0, pick: false, mentions: [], hold: false, gap: 0 },
        { t: 'members', conv: 0, add: [0, 1, 2, 3], remove: [] },
        { t: 'msg', conv: 0, sender: 3, pick: false, mentions: [1], hold: false, gap: 0 },
        { t: 'check', limit: 2 },
        { t: 'members', conv: 0, add: [0, 1, 4], remove: [2, 3] },
        { t: 'msg', conv: 0, sender: 4, pick: false, mentions: [0], hold: false, gap: 0 },
        { t: 'members', conv: 0, add: [0, 1, 2, 3], remove: [] },
        { t: 'msg', conv: 0, sender: 2, pick: false, mentions: [], hold: false, gap: 0 },
      ],
      finalLimits: [1, 2, 3, 1, 2],
    },
  },
];

/** Rules of the specification that random runs reach only rarely, pinned as fixed scenarios. */
const EXAMPLES: { name: string; scenario: Scenario }[] = [
  {
    // Read receipts' privacy rule (PROTOCOL.md "Privacy: `shareReads`"): in a one-to-one chat both
    // read; one turns sharing off (neither sees the other's position), reads further (not
    // recorded), turns it back on (its current readSeq is recorded again).
    name: 'shareReads off hides positions both ways in a one-to-one chat; on again records the current readSeq',
    scenario: {
      server: 0,
      actions: [
        { t: 'members', conv: 0, add: [0, 1], remove: [] },
        { t: 'msg', conv: 0, sender: 1, pick: false, mentions: [], hold: false, gap: 0 },
        { t: 'msg', conv: 0, sender: 0, pick: false, mentions: [], hold: false, gap: 0 },
        { t: 'read', user: 0, conv: 0, pick: false, all: true, permille: 0, jwt: false },
        { t: 'read', user: 1, conv: 0, pick: false, all: false, permille: 500, jwt: false },
        { t: 'check', limit: 2 },
        { t: 'shareReads', user: 1, share: false, jwt: true },
        { t: 'check', limit: 2 },
        { t: 'read', user: 1, conv: 0, pick: false, all: true, permille: 0, jwt: false },
        { t: 'msg', conv: 0, sender: 0, pick: false, mentions: [], hold: false, gap: 0 },
        { t: 'check', limit: 2 },
        { t: 'shareReads', user: 1, share: true, jwt: false },
        { t: 'check', limit: 2 },
      ],
      finalLimits: [2, 2, 2, 2, 2],
    },
  },
  {
    name: 'deleting a fully read conversation clears its "marked unread" dot; the next message brings it back without the dot',
    scenario: {
      server: 0,
      actions: [
        { t: 'members', conv: 0, add: [0, 1], remove: [] },
        { t: 'msg', conv: 0, sender: 1, pick: false, mentions: [], hold: false, gap: 0 },
        { t: 'read', user: 0, conv: 0, pick: false, all: true, permille: 0, jwt: false },
        { t: 'settings', user: 0, conv: 0, pick: false, markedUnread: true, jwt: true },
        { t: 'sync', user: 0, limit: 2, fresh: false },
        { t: 'delete', user: 0, conv: 0, pick: false, jwt: true },
        { t: 'sync', user: 0, limit: 2, fresh: false },
        { t: 'msg', conv: 0, sender: 1, pick: false, mentions: [0], hold: false, gap: 0 },
      ],
      finalLimits: [1, 1, 1, 1, 1],
    },
  },
  {
    name: 'a member who leaves and rejoins sees the conversation again with 0 unread, old mentions gone',
    scenario: {
      server: 0,
      actions: [
        { t: 'members', conv: 0, add: [0, 1, 2], remove: [], category: 'group' },
        { t: 'msg', conv: 0, sender: 1, pick: false, mentions: [0], hold: false, gap: 0 },
        { t: 'settings', user: 0, conv: 0, pick: false, muted: true, jwt: false },
        { t: 'members', conv: 0, add: [], remove: [0] },
        { t: 'msg', conv: 0, sender: 2, pick: false, mentions: [0], hold: false, gap: 0 },
        { t: 'sync', user: 0, limit: 1, fresh: false },
        { t: 'members', conv: 0, add: [0, 3], remove: [] },
        { t: 'sync', user: 0, limit: 1, fresh: false },
        { t: 'msg', conv: 0, sender: 3, pick: false, mentions: [0], hold: false, gap: 0 },
      ],
      finalLimits: [1, 2, 1, 1, 1],
    },
  },
  {
    name: 'a read-diffused group: duplicate, reordered and batched redeliveries only max-merge',
    scenario: {
      server: 0,
      actions: [
        { t: 'members', conv: 1, add: [0, 1, 2, 3, 4], remove: [], category: 'system' },
        { t: 'msg', conv: 1, sender: 0, pick: false, mentions: [1], hold: true, gap: 0 },
        { t: 'msg', conv: 1, sender: 2, pick: false, mentions: [3], hold: false, gap: 0 },
        { t: 'msg', conv: 1, sender: 4, pick: false, mentions: [0, 1], hold: true, gap: 0 },
        { t: 'batch', picks: [0, 1, 2, 1], includeHeld: true, single: false, shuffle: 7 },
        { t: 'concurrent', picks: [2, 1, 0, 2] },
        { t: 'read', user: 1, conv: 1, pick: false, all: false, permille: 500, jwt: true },
        { t: 'members', conv: 1, add: [], remove: [3, 4] },
        { t: 'msg', conv: 1, sender: 0, pick: false, mentions: [2], hold: false, gap: 0 },
      ],
      finalLimits: [2, 1, 3, 1, 1],
    },
  },
];

/** Fresh runs, in four batches, at most, after a draw that missed something EXERCISED names. */
const EXTRA_RUNS_AT_MOST = 200;

/** What the random runs must have exercised (coverage counters; see the random test). */
const EXERCISED: readonly CoverageKey[] = [
  'modeSwitches',
  'notFound',
  'syncSnapshots',
  'savedCursorSyncs',
  'protoNameRuns',
  'markedReadsAtReadSeq',
  'unreadsLowering',
  'privacyHidPositions',
  'mutedMentionsMoved',
  'nonCounting',
  'recalls',
  'recallsWhileLarge',
  'threadReplies',
  'follows',
  'unfollows',
  'threadReads',
  'topicMessages',
  'topicReads',
];

for (const kind of ENGINES) {
  describe(`HTTP API vs reference model (${kind} engine)`, () => {
    let redis: RedisServer | undefined;
    const servers: TestServer[] = [];

    beforeAll(async () => {
      if (kind === 'redis') redis = await startRedisServer();
      for (const config of CONFIGS) servers.push(await startTestServer({ engine: kind, ...config, ...(redis ? { redis } : {}) }));
      takeCoverage();
    });

    afterAll(async () => {
      console.log(`[property ${kind}] exercised: ${JSON.stringify(takeCoverage())}`);
      for (const server of servers) await server.close();
      await redis?.stop();
    });

    const serverFor = (scenario: Scenario): TestServer => {
      const server = servers[scenario.server];
      if (!server) throw new Error(`no server configuration ${scenario.server}`);
      return server;
    };

    /** Runs on a shared server, or on a store of its own when its ids are not unique to it. */
    const runOn = async (scenario: Scenario): Promise<void> => {
      if (!scenario.protoNames) return runScenario(serverFor(scenario), scenario);
      const own = await startTestServer({ engine: kind, ...CONFIGS[scenario.server], ...(redis ? { redis } : {}) });
      try {
        await runScenario(own, scenario);
      } finally {
        await own.close();
      }
    };

    for (const { name, scenario } of REGRESSIONS) {
      it(`regression: ${name}`, async () => {
        await runScenario(serverFor(scenario), scenario);
      });
    }

    for (const { name, scenario } of EXAMPLES) {
      it(`example: ${name}`, async () => {
        await runScenario(serverFor(scenario), scenario);
      });
    }

    it(
      'random scenarios converge to the model (unread, totals, sync from scratch and from old cursors); reconcile then finds nothing',
      async () => {
        const batch = (runs = NUM_RUNS): Promise<void> =>
          fc.assert(
            fc.asyncProperty(settingsScenarioArb(CONFIGS.length), async (scenario) => {
              await runOn(scenario);
            }),
            // Under CI, the first counterexample with its seed: shrinking one on a loaded machine can
            // outlast the timeout and report nothing.
            {
              numRuns: runs,
              endOnFailure: process.env.CI !== undefined,
              ...(SEED !== undefined ? { seed: Number(SEED) } : {}),
              ...(PATH !== undefined ? { path: PATH } : {}),
              timeout: RUN_TIMEOUT_MS,
            },
          );
        // Not vacuous: the random runs crossed the large-group threshold, met 404s, synced
        // across snapshots and from saved cursors, and read marked conversations where they
        // stood (the fixed cases above do not count here). Marks cleared by a read are counted
        // too but rarer (~8 in 200 runs): the engine model run holds both at a fixed seed.
        // Claimed of a run of the default size: a quick or mutation run may not meet every one.
        // The rarest (a marked conversation read at its readSeq: 2 to 5 in 200 runs) may be
        // missing from a draw by chance: fresh runs follow then (none with a seed, which would
        // replay the same draw).
        const claimed = NUM_RUNS >= 100 ? EXERCISED : [];
        const moved = await runUntilExercised(claimed, batch, {
          extraRuns: EXTRA_RUNS_AT_MOST / 4,
          extraBatches: SEED === undefined ? 4 : 0,
          label: `property ${kind}`,
        });
        for (const key of claimed) expect(moved[key], `random runs exercised ${key}`).toBeGreaterThan(0);
        // Reconcile finds nothing on the stores the scenarios left (tombstones, pending records,
        // mode switches). Here, not in a test of its own: that one would depend on running after this.
        for (const server of servers) {
          const config = server.config;
          const toolbox = new LocalToolbox(server.engine, adminOf(server.engine), { ...config, largeGroupThreshold: config.largeGroupThreshold });
          const report = await walk(toolbox, false);
          expect(report.users).toBeGreaterThan(0);
          expect(report.findings).toEqual([]);
        }
      },
      // Generous: on a loaded 2-core machine the Redis runs take up to ~2 min (44 s for memory),
      // and past 300 s with a second suite and more alongside (load average 6 and up).
      Math.max(600_000, (NUM_RUNS + EXTRA_RUNS_AT_MOST) * 3_000),
    );
  });
}
