import type { HttpTarget } from '../lib/http.js';
import { atLeast, atMost, emptyReport, fmt, type Section, type SectionReport, type Verdict } from '../lib/section.js';
import { renderBarChart } from '../lib/svg-chart.js';
import { fmtRate } from '../lib/table.js';
import { type RunningSystem, SYSTEMS, type SystemId, startSystem } from '../systems.js';
import { type Audience, directAudience, groupAudience, type SaturationLoad, type SaturationResult, SaturationSession } from './saturation-session.js';

/**
 * One-to-one: 256 messages in flight, 16 per POST. One message per request would make the load
 * generator's own HTTP client the bottleneck (one Node process also reads every push); the
 * per-request path is what scenario `ingest` measures.
 */
export const DIRECT_LOAD: SaturationLoad = { inFlight: 256, batch: 16 };

const SYSTEM_ORDER: readonly SystemId[] = ['uws-raw', 'socketio-redis', 'redpoint-memory', 'redpoint-redis'];

interface Shape {
  id: string;
  label: string;
  audience: (http: HttpTarget, tag: string) => Promise<Audience>;
  load: SaturationLoad;
}

function shapes(quick: boolean): Shape[] {
  const direct = quick ? 500 : 2000;
  const groups = quick ? 5 : 20;
  const large = quick ? 1000 : 2000;
  return [
    { id: '1to1', label: `one-to-one, ${direct} clients`, audience: (http, tag) => directAudience(http, tag, direct), load: DIRECT_LOAD },
    {
      id: 'group100',
      label: `${groups} groups of 100 members (write diffusion), ${groups * 99} clients`,
      audience: (http, tag) => groupAudience(http, tag, groups, 100),
      // About one message in flight per group: pushes are not merged away by group commit.
      load: { inFlight: groups, batch: 1 },
    },
    {
      id: 'large',
      label: `one group of ${large} members (read diffusion), ${large - 1} clients`,
      audience: (http, tag) => groupAudience(http, tag, 1, large),
      load: { inFlight: 4, batch: 1 },
    },
  ];
}

/**
 * Deliveries per second at the clients at saturation, and the server's CPU per delivery, for
 * Redpoint on both engines, raw uWS publish and Socket.IO with its Redis adapter, side by side.
 */
export const saturationSection: Section = {
  id: 'notify-saturation',
  title: 'Notify at saturation — deliveries/s and server CPU per delivery',
  inDefaultPlan: true,
  async run(ctx) {
    const quick = ctx.options.quick;
    const seconds = quick ? 2 : 8;
    const rounds = quick ? 2 : 4;
    const report = emptyReport(this.id, this.title);
    const systems: RunningSystem[] = [];
    const results = new Map<string, SaturationResult[]>();
    try {
      for (const id of SYSTEM_ORDER) systems.push(await startSystem(SYSTEMS[id]));
      for (const shape of shapes(quick)) {
        const sessions: SaturationSession[] = [];
        try {
          for (const system of systems) {
            const session = await SaturationSession.open(system, (http) => shape.audience(http, `sat-${shape.id}`), shape.load).catch((err: unknown) => {
              throw new Error(
                `${shape.id} / ${system.spec.id}: ${err instanceof Error ? err.message : String(err)}; the server's last output:\n${system.output().slice(-2000)}`,
              );
            });
            sessions.push(session);
            await session.drive(quick ? 0.5 : 1, false);
          }
          for (let r = 0; r < rounds; r++) {
            for (const s of r % 2 === 0 ? sessions : [...sessions].reverse()) await s.drive(seconds / rounds, true);
          }
          results.set(
            shape.id,
            sessions.map((s) => s.result()),
          );
          ctx.log(`  notify-saturation: ${shape.id} done`);
        } finally {
          for (const s of sessions) s.close();
        }
      }
    } finally {
      await Promise.allSettled(systems.map((s) => s.stop()));
    }
    fill(report, shapes(quick), results, seconds, rounds);
    return report;
  },
};

function fill(report: SectionReport, list: Shape[], results: Map<string, SaturationResult[]>, seconds: number, rounds: number): void {
  report.method.push(
    `Each system runs in its own process (Redis-backed ones with a private redis-server); the clients (one Node process, JSON text frames) and the load generator share this machine. Messages are POSTed closed-loop: at most N messages in flight that have not yet reached all their online recipients (one-to-one: 256, 16 to distinct conversations per POST, so that the load generator's own HTTP client is not the bottleneck; 100-member groups: one per group, one per POST, so group commit has little to merge; the large group: 4, one per POST), so the rate is what server and clients can deliver end to end. A delivery is a (client, message) pair the client learns of; \`frames/s\` counts push frames (Redpoint may merge messages of one conversation into one push). Measured ${seconds} s per system and shape in ${rounds} interleaved rounds, after a warm-up.`,
    "`server CPU/delivery`: the server process's user + system CPU from /proc over the measured windows ÷ deliveries; `Redis CPU/delivery`: the redis-server's (INFO used_cpu), for the systems on Redis. CPU per delivery is the robust figure here: deliveries/s is bounded by the clients' process and the shared cores as much as by the server.",
  );
  const verdicts: Verdict[] = [];
  for (const shape of list) {
    const rs = results.get(shape.id) ?? [];
    const uws = rs.find((r) => r.system === 'uws-raw');
    const sio = rs.find((r) => r.system === 'socketio-redis');
    report.tables.push({
      caption: shape.label,
      table: {
        header: [
          'system',
          'messages/s',
          'deliveries/s',
          'vs uWS',
          'vs Socket.IO',
          'frames/s',
          'server CPU/delivery',
          'Redis CPU/delivery',
          'server cores',
          'lost',
          'errors',
        ],
        rows: rs.map((r) => [
          r.system,
          fmtRate(r.messagesPerSec),
          fmtRate(r.deliveriesPerSec),
          fmt.ratio(r.deliveriesPerSec / (uws?.deliveriesPerSec ?? NaN)),
          fmt.ratio(r.deliveriesPerSec / (sio?.deliveriesPerSec ?? NaN)),
          fmtRate(r.framesPerSec),
          fmt.us(r.serverCpuUsPerDelivery),
          fmt.us(r.redisCpuUsPerDelivery),
          r.serverCores.toFixed(2),
          String(r.lost),
          String(r.postErrors + r.clientErrors),
        ]),
      },
    });
    for (const engine of ['redpoint-redis', 'redpoint-memory'] as const) {
      const rp = rs.find((r) => r.system === engine);
      if (!rp) continue;
      if (shape.id === '1to1' && engine === 'redpoint-redis') {
        verdicts.push(atLeast(`one-to-one deliveries/s, ${engine} vs socketio-redis`, rp.deliveriesPerSec / (sio?.deliveriesPerSec ?? NaN), 2, fmt.ratio));
      }
      if (engine === 'redpoint-redis' && (shape.id === '1to1' || shape.id === 'group100')) {
        // What one Redis alone allows: its CPU per delivery, on a core of its own.
        const ceiling = 1e6 / rp.redisCpuUsPerDelivery;
        const goal = shape.id === '1to1' ? 2 * (sio?.deliveriesPerSec ?? NaN) : 0.5 * (uws?.deliveriesPerSec ?? NaN);
        report.notes.push(
          `${shape.id} / ${engine}: at ${fmt.us(rp.redisCpuUsPerDelivery)} of Redis CPU per delivery, one redis-server on a core of its own tops out near ${fmtRate(ceiling)} deliveries/s, with the server and the clients costing nothing; the target here is ${fmtRate(goal)}/s${ceiling < goal ? ', beyond what one Redis can do at this cost per delivery' : ''}.`,
        );
      }
      if (shape.id === 'group100')
        verdicts.push(atLeast(`100-member groups deliveries/s, ${engine} vs uws-raw`, rp.deliveriesPerSec / (uws?.deliveriesPerSec ?? NaN), 0.5, fmt.ratio));
      if (shape.id === 'large')
        verdicts.push(
          atMost(`large group server CPU per delivery, ${engine} vs uws-raw`, rp.serverCpuUsPerDelivery / (uws?.serverCpuUsPerDelivery ?? NaN), 1.2, fmt.ratio),
        );
    }
    for (const r of rs) {
      if (r.redisCommands.length > 0) {
        const top = r.redisCommands.slice(0, 5).map((c) => `${c.command} ${c.callsPerMessage.toFixed(2)} (${c.usPerMessage.toFixed(1)} µs)`);
        report.notes.push(
          `${shape.id} / ${r.system}: Redis commands per message (calls, and their time inside Redis from INFO commandstats): ${top.join(', ')}.`,
        );
      }
      if (r.lost > 0)
        report.notes.push(
          `${shape.id} / ${r.system}: ${r.lost} messages did not reach all their recipients within 3 s and were given up on (dropped pushes, or a backlog).`,
        );
    }
  }
  report.verdicts.push(...verdicts);
  report.charts.push({
    name: 'cpu-per-delivery',
    title: 'notify at saturation: CPU per delivery',
    svg: renderBarChart({
      title: 'Notify at saturation: CPU per delivery',
      subtitle: 'server process (/proc) and redis-server (INFO) CPU over the measured windows ÷ (client, message) deliveries',
      unit: 'µs',
      series: [
        { name: 'server', color: '#3b7dd8' },
        { name: 'Redis', color: '#e8833a' },
      ],
      groups: list.map((shape) => ({
        title: shape.label,
        rows: (results.get(shape.id) ?? []).map((r) => ({ label: r.system, values: [r.serverCpuUsPerDelivery, r.redisCpuUsPerDelivery] })),
      })),
    }),
  });
  report.notes.push(
    'The Socket.IO clients (socket.io-client, one per user) cost the client process more per frame than the `ws` clients of the others, so its deliveries/s is partly bound by the client side; its server CPU per delivery is not.',
  );
  report.data = Object.fromEntries(results);
}
