import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { CLOSE_CODES } from '../../protocol/close-codes.js';
import { ERROR_CODES } from '../../protocol/errors.js';
import { ENDPOINTS } from '../../protocol/http-api.js';
import type { StoreError, StoreErrorKind } from '../../server/engine/store-errors.js';
import type { StoreHealth } from '../../server/engine/store-health.js';
import type { FailedCall } from '../../server/gateway/error-mapper.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';
import {
  DEPLOY,
  dashboard,
  exposedLabelValues,
  exposedNames,
  expressions,
  RULE_TEST_FILES,
  rules,
  ruleTestCases,
  scrapeJobs,
  selectors,
} from './monitoring-kit.js';

/**
 * The Grafana dashboard and the Prometheus alert rules of deploy/: every expression parses as
 * PromQL, every metric it names is in a real server's /metrics (a HELP/TYPE line is enough: a
 * labelled series appears only once something happened), every label value it matches on is one
 * the server uses, promtool checks the rules and runs their unit tests (each rule fires in one
 * and stays quiet in another), and the READMEs list the rules as they are.
 */

/** Series Prometheus itself makes for each scrape target. */
const MADE_BY_PROMETHEUS = new Set(['up']);
/** Route labels that are no endpoint pattern (the router's names for them). */
const OTHER_ROUTES = ['fallback', 'demo', 'cors_preflight'];
const SEVERITIES = new Set(['critical', 'warning', 'info']);

/** `list`, which typechecks only if it names every member of the union T. */
function everyMember<T extends string>() {
  return <const L extends readonly T[]>(list: L & (Exclude<T, L[number]> extends never ? unknown : { missing: Exclude<T, L[number]> })): ReadonlySet<string> =>
    new Set(list);
}

const STORE_ERROR_KINDS = everyMember<StoreErrorKind>()([
  'not_ready',
  'timeout',
  'connection_lost',
  'untrusted_reply',
  'redirect',
  'cluster_down',
  'loading',
  'busy',
  'readonly',
  'oom',
  'misconf',
  'masterdown',
  'noreplicas',
  'deadline',
  'restore',
]);
const STORE_OUTCOMES = everyMember<StoreError['outcome']>()(['not_applied', 'unknown']);
const TRANSPORTS = everyMember<FailedCall['transport']>()(['http', 'ws']);
const BUS_OPS = everyMember<Parameters<StoreHealth['busFailed']>[0]>()(['subscribe']);

const run = promisify(execFile);

async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd: join(DEPLOY, 'prometheus') });
    return stdout + stderr;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (e.code === 'ENOENT')
      throw new Error("promtool not found: install Debian's prometheus package (apt-get install -y --no-install-recommends prometheus); the test never skips");
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

async function scrape(server: TestServer): Promise<string> {
  const res = await server.request('GET', '/metrics', { auth: 'none' });
  expect(res.status).toBe(200);
  return res.text;
}

/** The lines of a markdown section: from its heading to the next heading of the same or a higher level. */
function section(markdown: string, heading: string): string {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  expect(start, heading).toBeGreaterThanOrEqual(0);
  const level = heading.indexOf(' ');
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && l.indexOf(' ') <= level);
  return lines.slice(start, end === -1 ? undefined : end).join('\n');
}

describe('deploy kit: dashboard and alert rules', () => {
  /** Runs the reconcile job and has refused a seq jump, so that their labelled series exist. */
  let server: TestServer;
  /** Neither: what a deployment without RECONCILE_EVERY exposes. */
  let plain: TestServer;
  let names: Set<string>;
  let observed: Map<string, Map<string, Set<string>>>;

  beforeAll(async () => {
    server = await startTestServer({ config: { reconcileEverySeconds: 3600, maxSeqJump: 10 } });
    await server.members('team', { add: ['alice', 'bob'] });
    expect((await server.api('POST', '/v1/messages', { conv: 'team', seq: 1000, sender: 'alice' })).status).toBe(422);
    // The job walks at start, then pauses for RECONCILE_EVERY: wait for that first walk.
    await vi.waitFor(
      async () => {
        if (!/^redpoint_reconcile_runs_total 1$/m.test(await scrape(server))) throw new Error('the reconcile job has not finished its first walk');
      },
      { timeout: 20_000, interval: 50 },
    );
    const text = await scrape(server);
    names = exposedNames(text);
    observed = exposedLabelValues(text);
    plain = await startTestServer();
  });
  afterAll(async () => {
    await server?.close();
    await plain?.close();
  });

  it('every expression parses, and every metric it uses is in /metrics', async () => {
    const all = (await expressions()).flatMap(selectors);
    expect(new Set(all.map((s) => s.where)).size).toBeGreaterThan(50);
    const missing = all.filter((s) => !names.has(s.metric) && !MADE_BY_PROMETHEUS.has(s.metric)).map((s) => `${s.where}: ${s.metric}`);
    expect(missing).toEqual([]);
    // The check itself is not vacuous: the metrics a server exports are found, a made-up one is not.
    expect(names.has('redpoint_http_request_duration_seconds_bucket')).toBe(true);
    expect(names.has('redpoint_no_such_metric_total')).toBe(false);
  });

  it('every label value an expression matches on is one the server uses', async () => {
    const routes = new Set([...ENDPOINTS.map((e) => e.path), ...OTHER_ROUTES]);
    const jobs = new Set(await scrapeJobs());
    const codes = new Set(Object.keys(ERROR_CODES));
    const unavailableCodes = new Set(
      Object.entries(ERROR_CODES)
        .filter(([, c]) => c.status === 503)
        .map(([code]) => code),
    );
    /** What the values of a label can be, from the server's own definitions; undefined: unknown here. */
    const known = (metric: string, label: string): ReadonlySet<string> | undefined => {
      if (label === 'route') return routes;
      if (label === 'job') return jobs;
      if (label === 'reason') return new Set(Object.keys(CLOSE_CODES));
      if (metric === 'redpoint_errors_total' && label === 'code') return codes;
      if (metric === 'redpoint_unavailable_replies_total') return label === 'code' ? unavailableCodes : label === 'transport' ? TRANSPORTS : undefined;
      if (metric === 'redpoint_store_errors_total') return label === 'kind' ? STORE_ERROR_KINDS : label === 'outcome' ? STORE_OUTCOMES : undefined;
      if (metric === 'redpoint_bus_errors_total' && label === 'op') return BUS_OPS;
      return undefined;
    };
    const wrong: string[] = [];
    let checked = 0;
    for (const s of (await expressions()).flatMap(selectors)) {
      for (const [label, value] of s.equals) {
        checked++;
        // Either the server's definitions say the value exists, or the server was seen using it.
        if (known(s.metric, label)?.has(value) || observed.get(s.metric)?.get(label)?.has(value)) continue;
        wrong.push(`${s.where}: ${s.metric}{${label}="${value}"}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(checked).toBeGreaterThan(15);
    // Not vacuous: a misspelt value is caught, from either source.
    expect(known('redpoint_store_errors_total', 'kind')?.has('out_of_memory')).toBe(false);
    expect(observed.get('redpoint_seq_jumps_total')?.get('action')).toEqual(new Set(['refused']));
  });

  it("RedpointReconcileNotRunning's guard holds: ids-checked series exist where the job runs, and only there", async () => {
    expect(observed.get('redpoint_reconcile_checked_total')?.get('subject')).toEqual(new Set(['users', 'conversations']));
    expect(Number(/^redpoint_reconcile_last_run_timestamp_seconds (\S+)$/m.exec(await scrape(server))?.[1])).toBeGreaterThan(Date.now() / 1000 - 60);
    const off = await scrape(plain);
    expect(exposedLabelValues(off).has('redpoint_reconcile_checked_total')).toBe(false);
    expect(exposedNames(off).has('redpoint_reconcile_checked_total')).toBe(true);
    expect(off).toMatch(/^redpoint_reconcile_runs_total 0$/m);
  });

  it('the dashboard is well-formed: unique ids, every panel on the chosen data source, within the grid, none overlapping', async () => {
    const board = await dashboard();
    const ids = board.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of board.panels.filter((p) => p.type !== 'row')) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own variable syntax
      expect(panel.datasource?.uid, panel.title).toBe('${datasource}');
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own variable syntax
      for (const target of panel.targets ?? []) expect(target.datasource?.uid, panel.title).toBe('${datasource}');
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
    }
    const overlaps: string[] = [];
    for (const [i, a] of board.panels.entries()) {
      for (const b of board.panels.slice(i + 1)) {
        const apart =
          a.gridPos.x + a.gridPos.w <= b.gridPos.x ||
          b.gridPos.x + b.gridPos.w <= a.gridPos.x ||
          a.gridPos.y + a.gridPos.h <= b.gridPos.y ||
          b.gridPos.y + b.gridPos.h <= a.gridPos.y;
        if (!apart) overlaps.push(`"${a.title}" and "${b.title}"`);
      }
    }
    expect(overlaps).toEqual([]);
    const rows = board.panels.filter((p) => p.type === 'row').map((p) => p.title);
    expect(rows).toEqual(expect.arrayContaining(['Store health', 'Reconcile and data quality']));
  });

  it("promtool accepts the rules and the Prometheus config, and the rules' unit tests pass", async () => {
    expect(await promtool('check', 'rules', 'alerts.yml')).toMatch(/SUCCESS: \d+ rules found/);
    expect(await promtool('check', 'config', 'prometheus.yml')).toMatch(/is valid prometheus config file syntax/);
    const tested = await promtool('test', 'rules', ...RULE_TEST_FILES);
    expect(tested.match(/SUCCESS/g)).toHaveLength(RULE_TEST_FILES.length);
  });

  it('every rule waits (for:), has a severity, and is unit-tested firing and quiet', async () => {
    const cases = await ruleTestCases();
    const problems: string[] = [];
    for (const rule of await rules()) {
      if (rule.for === undefined) problems.push(`${rule.alert}: no for:`);
      if (!SEVERITIES.has(rule.labels?.severity ?? '')) problems.push(`${rule.alert}: severity ${rule.labels?.severity}`);
      if (!cases.get(rule.alert)?.fires) problems.push(`${rule.alert}: no test where it fires`);
      if (!cases.get(rule.alert)?.quiet) problems.push(`${rule.alert}: no test where it stays quiet`);
    }
    expect(problems).toEqual([]);
  });

  it('the unread-summary alert fires at 0.55% non-2xx on its route and stays quiet at 0.45% (promtool, on the real rule)', async () => {
    // promtool evaluates the rule itself: a regex over its text would pass a threshold that never
    // fires (a wrong label, `<` for `>`, a ratio turned upside down).
    const dir = await mkdtemp(join(tmpdir(), 'redpoint-rule-'));
    try {
      const route = 'route="/v1/users/:uid/unread"';
      const at = (perMille: string, failing: number) => ({
        interval: '1m',
        input_series: [
          { series: `redpoint_http_requests_total{job="redpoint",instance="a:8080",${route},status="200"}`, values: `0+${2000 - failing}x20` },
          { series: `redpoint_http_requests_total{job="redpoint",instance="a:8080",${route},status="503"}`, values: `0+${failing}x20` },
        ],
        alert_rule_test: [
          {
            eval_time: '15m',
            alertname: 'RedpointUnreadSummaryFailures',
            exp_alerts:
              perMille === 'quiet'
                ? []
                : [
                    {
                      exp_labels: { severity: 'warning', job: 'redpoint' },
                      exp_annotations: {
                        summary: 'More than 0.5% of unread summaries fail',
                        description: `${perMille} of GET /v1/users/:uid/unread answered non-2xx over 5 minutes.`,
                      },
                    },
                  ],
          },
        ],
      });
      const file = join(dir, 'threshold.test.yml');
      await writeFile(
        file,
        stringify({ rule_files: [join(DEPLOY, 'prometheus', 'alerts.yml')], evaluation_interval: '1m', tests: [at('0.55%', 11), at('quiet', 9)] }),
      );
      expect(await promtool('test', 'rules', file)).toMatch(/SUCCESS/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('deploy/README.md lists every rule with its severity, and the alert table of docs/operations.md names only rules that exist', async () => {
    const all = await rules();
    const table = section(await readFile(join(DEPLOY, 'README.md'), 'utf8'), '## Alerts');
    const listed = new Map([...table.matchAll(/^\| `(Redpoint\w+)` \|.*\| (\w+) \|$/gm)].map(([, alert, severity]) => [alert, severity]));
    expect(new Map(all.map((r) => [r.alert, r.labels?.severity]))).toEqual(listed);
    const thresholds = section(await readFile(join(DEPLOY, '../docs/operations.md'), 'utf8'), '### Metrics to alert on');
    const named = new Set([...thresholds.matchAll(/`(Redpoint\w+)`/g)].map(([, alert]) => alert));
    expect([...named].filter((alert) => !all.some((r) => r.alert === alert))).toEqual([]);
    expect(named.size).toBeGreaterThan(15);
    // Every metric the table suggests alerting on is one the server exports.
    const metrics = [...thresholds.matchAll(/^\| `(redpoint_\w+)` \|/gm)].map(([, metric]) => metric ?? '');
    expect(metrics.filter((m) => !names.has(m))).toEqual([]);
  });
});
