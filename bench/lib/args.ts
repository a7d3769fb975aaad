import { parseArgs } from 'node:util';

export interface BenchOptions {
  quick: boolean;
  /** Tokens: a section (notify, ingest), a system id, a scenario id or kind (1to1, group, group-100). */
  only: string[];
  /** Measured seconds per notify run (after the warm-up). */
  seconds: number;
  warmupSeconds: number;
  /** Measured time is cut into this many rounds, alternating the systems' order. */
  rounds: number;
  /** Client counts (the scale parameter, like BenchmarkHubBroadcast_{1,100,1000}Subs). */
  scales: number[];
  /** 1:1 messages per second. */
  rate: number;
  /** Group messages per second (each reaches every online member). */
  groupRate: number;
  groupSize: number;
  ingestSeconds: number;
  ingestWarmupSeconds: number;
  ingestRounds: number;
  connections: number;
  /** Report base name in bench/reports/ (`latest`, or `quick` with --quick). */
  out: string;
  /** Scenario `sweep`: connected users, and WS_VERSION_EVERY_SECONDS. */
  sweepUsers: number;
  sweepPeriodSeconds: number;
  /** Scenario `soak`: measured seconds per engine. */
  soakSeconds: number;
}

const USAGE = `npm run bench -- [options]
  --quick                short runs at smaller scales (5-6 min in all)
  --only <a,b>           sections (notify, ingest), systems (uws-raw, redis-raw, socketio-redis,
                         redpoint-memory, redpoint-redis) or scenarios (1to1, group, 1to1-100, group-1000)
  --duration <s>         measured seconds per notify run        (default 8, quick 2)
  --warmup <s>           warm-up seconds before each run        (default 2, quick 0.5)
  --rounds <n>           rounds the measured time is cut into   (default 4, quick 2)
  --scales <n,n>         connected clients per scenario         (default 100,1000, quick 1000)
  --rate <n>             1:1 messages/s                          (default 1000)
  --group-rate <n>       group messages/s                        (default 10)
  --group-size <n>       group members (read diffusion above 500) (default 1000)
  --ingest-duration <s>  autocannon seconds per system and batch (default 6, quick 2; 2 rounds)
  --connections <n>      autocannon connections                  (default 32)
  --out <name>           report name in bench/reports/           (default latest, quick: quick)
  --sweep-users <n>      sweep: connected users                  (default 19500, quick 4000)
  --sweep-period <s>     sweep: WS_VERSION_EVERY_SECONDS         (default 20, quick 8)
  --soak-seconds <s>     soak: measured seconds per engine       (default 600, quick 20)

Other scenarios (select with --only): memory, store, cluster, ingest-cost, gc, notify-saturation,
reconnect, sweep, order, soak, workers, queue-ingest, durable.`;

export function parseBenchArgs(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      only: { type: 'string' },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      rounds: { type: 'string' },
      scales: { type: 'string' },
      rate: { type: 'string' },
      'group-rate': { type: 'string' },
      'group-size': { type: 'string' },
      'ingest-duration': { type: 'string' },
      connections: { type: 'string' },
      out: { type: 'string' },
      'sweep-users': { type: 'string' },
      'sweep-period': { type: 'string' },
      'soak-seconds': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const quick = values.quick ?? false;
  const num = (name: string, raw: string | undefined, fallback: number, min: number, max: number): number => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || n > max) throw new Error(`--${name}: expected a number in [${min}, ${max}], got ${raw}`);
    return n;
  };
  const scales = (values.scales ?? (quick ? '1000' : '100,1000')).split(',').map((s) => num('scales', s, 0, 1, 5000));
  const ingestSeconds = num('ingest-duration', values['ingest-duration'], quick ? 2 : 6, 2, 120);
  return {
    quick,
    only: (values.only ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    seconds: num('duration', values.duration, quick ? 2 : 8, 0.5, 300),
    warmupSeconds: num('warmup', values.warmup, quick ? 0.5 : 2, 0, 60),
    rounds: num('rounds', values.rounds, quick ? 2 : 4, 1, 20),
    scales,
    rate: num('rate', values.rate, 1000, 1, 20_000),
    groupRate: num('group-rate', values['group-rate'], 10, 1, 2_000),
    groupSize: num('group-size', values['group-size'], 1000, 2, 10_000),
    ingestSeconds,
    ingestWarmupSeconds: quick ? 0.5 : 1,
    ingestRounds: 2,
    connections: num('connections', values.connections, 32, 1, 1000),
    out: values.out ?? (quick ? 'quick' : 'latest'),
    sweepUsers: num('sweep-users', values['sweep-users'], quick ? 4000 : 19_500, 10, 100_000),
    sweepPeriodSeconds: num('sweep-period', values['sweep-period'], quick ? 8 : 20, 1, 3600),
    soakSeconds: num('soak-seconds', values['soak-seconds'], quick ? 20 : 600, 10, 7200),
  };
}
