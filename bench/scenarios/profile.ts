import { CATEGORIES } from '../lib/cpu-profile.js';
import { atMost, emptyReport, fmt, type Section, type SectionContext } from '../lib/section.js';
import { fmtRate } from '../lib/table.js';
import { type ProfiledRun, type ProfiledWindow, profiledRun } from './profiled-run.js';

const IDLE = 'idle (waiting: Redis, network)';
const TARGET_GC_SHARE = 0.1;

/** Both engines' profiled runs, made once for the sections that read them. */
function profiledRuns(ctx: SectionContext): Promise<ProfiledRun[]> {
  const seconds = ctx.options.quick ? 2 : 8;
  return ctx.once('profiled-runs', async () => [await profiledRun('memory', seconds, ctx.log), await profiledRun('redis', seconds, ctx.log)]);
}

const busy = (w: ProfiledWindow): number => w.profile.totalMicros - (w.profile.micros.get(IDLE) ?? 0);
const windowOf = (run: ProfiledRun | undefined, name: ProfiledWindow['name']): ProfiledWindow | undefined => run?.windows.find((w) => w.name === name);

const METHOD =
  "The server runs under `node --cpu-prof` (250 µs sampling) while autocannon saturates `POST /v1/messages` (32 connections, one message per request, 1:1 conversations). The profile is cut to the measured window by the monotonic clock, which the profile and the load generator share. Self time of each sample is charged to a category by the file of its function, or of the nearest caller with one (JSON.parse inside the body decoder is JSON, a socket write ioredis asked for is ioredis): `HTTP` holds the router's own code and what it calls without a frame of its own (uWS' writeStatus/end, JSON.stringify of the reply); `native` is V8's `(program)` — uWS' C++ HTTP parsing and socket I/O outside any JS call; `idle` is the event loop waiting (for Redis replies or the next request), wall time, not CPU. The profile covers the main thread; the CPU /proc reports for the window covers every thread (V8's helper threads for GC marking and compilation, libuv), and on a loaded machine a sample may also stand for time the thread waited for a core: both totals are shown.";

/** Scenario `ingest`'s explanation: where one request's time goes, per engine. */
export const ingestCostSection: Section = {
  id: 'ingest-cost',
  title: 'Ingest: cost per request by category (CPU profile)',
  inDefaultPlan: true,
  async run(ctx) {
    const runs = await profiledRuns(ctx);
    const report = emptyReport(this.id, this.title);
    report.method.push(METHOD, 'The window here is the ingest path alone: no client connected, so no push is made.');
    const cols = runs.map((r) => ({ engine: r.engine, w: windowOf(r, 'ingest') }));
    const perRequest = (w: ProfiledWindow | undefined, us: number): string => (w && w.requests > 0 ? fmt.us(us / w.requests) : '—');
    const rows = CATEGORIES.filter((c) => cols.some(({ w }) => (w?.profile.micros.get(c) ?? 0) > 0)).map((c) => [
      c,
      ...cols.map(({ w }) => perRequest(w, w?.profile.micros.get(c) ?? 0)),
      // Idle is not part of the busy time it would be a share of.
      ...cols.map(({ w }) => (!w || c === IDLE ? '' : fmt.pct((w.profile.micros.get(c) ?? 0) / Math.max(1, busy(w))))),
    ]);
    rows.push(['**busy (profile, all but idle)**', ...cols.map(({ w }) => perRequest(w, w ? busy(w) : NaN)), ...cols.map(() => '100%')]);
    rows.push(['**server CPU (/proc)**', ...cols.map(({ w }) => perRequest(w, w?.cpuMicros ?? NaN)), ...cols.map(() => '')]);
    rows.push(['requests/s in the window', ...cols.map(({ w }) => (w ? fmtRate(w.requests / w.seconds) : '—')), ...cols.map(() => '')]);
    report.tables.push({
      caption: 'µs per request by category, and share of the busy time',
      table: { header: ['category', ...cols.map((c) => `${c.engine} µs/req`), ...cols.map((c) => `${c.engine} share`)], rows },
    });
    for (const { engine, w } of cols) {
      if (!w) continue;
      report.tables.push({
        caption: `Hottest functions by self time — ${engine} engine`,
        table: { header: ['function', 'category', 'µs/req'], rows: w.profile.top.slice(0, 12).map((t) => [t.frame, t.category, perRequest(w, t.micros)]) },
      });
    }
    const http = (w: ProfiledWindow | undefined): number =>
      w
        ? ['HTTP (router, uWS calls, reply JSON)', 'native (uWS C++, V8 builtins)', 'JSON (body decode)', 'validation (TypeBox)', 'auth'].reduce(
            (n, c) => n + (w.profile.micros.get(c) ?? 0),
            0,
          ) / Math.max(1, w.requests)
        : NaN;
    report.notes.push(
      `HTTP, JSON, validation and auth together (the request's own cost, before ingest): ${cols.map(({ engine, w }) => `${engine} ${fmt.us(http(w))}/request`).join(', ')}.`,
    );
    report.data = runs.map((r) => ({ engine: r.engine, window: serialize(windowOf(r, 'ingest')) }));
    return report;
  },
};

/** GC's share of the server's busy time at saturation, from the same profiles. */
export const gcSection: Section = {
  id: 'gc',
  title: "GC share of the server's busy time at saturation",
  inDefaultPlan: true,
  async run(ctx) {
    const runs = await profiledRuns(ctx);
    const report = emptyReport(this.id, this.title);
    report.method.push(
      METHOD,
      "GC is the profile's `(garbage collector)` self time (main-thread pauses; V8's concurrent marking on helper threads is not in it, but shows in the /proc CPU). Two windows per engine: the ingest path alone, and ingest with every recipient connected (each message also a push).",
    );
    const rows: string[][] = [];
    for (const r of runs) {
      for (const w of r.windows) {
        const gc = w.profile.micros.get('GC') ?? 0;
        rows.push([
          r.engine,
          w.name,
          fmtRate(w.requests / w.seconds),
          (gc / 1000).toFixed(0),
          (busy(w) / 1000).toFixed(0),
          (w.cpuMicros / 1000).toFixed(0),
          fmt.pct(gc / Math.max(1, busy(w))),
          fmt.us(gc / Math.max(1, w.requests)),
        ]);
      }
    }
    report.tables.push({
      caption: 'GC per window',
      table: { header: ['engine', 'window', 'requests/s', 'GC ms', 'busy ms (profile)', 'CPU ms (/proc)', 'GC share of busy', 'GC µs/request'], rows },
    });
    const shares = (runs.find((r) => r.engine === 'redis')?.windows ?? []).map((w) => (w.profile.micros.get('GC') ?? 0) / Math.max(1, busy(w)));
    if (shares.length > 0)
      report.verdicts.push(atMost('GC share of busy time on the Redis engine at saturation (the worse window)', Math.max(...shares), TARGET_GC_SHARE, fmt.pct));
    report.data = runs.map((r) => ({ engine: r.engine, windows: r.windows.map(serialize) }));
    return report;
  },
};

function serialize(w: ProfiledWindow | undefined): unknown {
  if (!w) return null;
  return { ...w, profile: { totalMicros: w.profile.totalMicros, micros: Object.fromEntries(w.profile.micros), top: w.profile.top } };
}
