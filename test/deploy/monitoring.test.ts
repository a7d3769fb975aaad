import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parser } from '@prometheus-io/lezer-promql';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLOSE_CODES } from '../../protocol/close-codes.js';
import { ERROR_CODES } from '../../protocol/errors.js';
import { ENDPOINTS } from '../../protocol/http-api.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * The Grafana dashboard and the Prometheus alert rules of deploy/: every expression parses as
 * PromQL, every metric it names is in a real server's /metrics (a HELP/TYPE line is enough: a
 * labelled series appears only once something happened), the label values that are easy to get
 * wrong (routes, error codes, close reasons) are ones the server uses, and promtool checks the
 * rules and runs their unit tests (deploy/prometheus/alerts.test.yml).
 */

const DEPLOY = join(import.meta.dirname, '../../deploy');
/** Series Prometheus itself makes for each scrape target. */
const MADE_BY_PROMETHEUS = new Set(['up']);
/** Route labels that are no endpoint pattern (the router's names for them). */
const OTHER_ROUTES = ['fallback', 'demo', 'cors_preflight'];

interface Expression {
  where: string;
  expr: string;
}

interface Selector {
  where: string;
  metric: string;
  /** `name="value"` matchers (exact equality only). */
  equals: Array<[string, string]>;
}

async function expressions(): Promise<Expression[]> {
  const out: Expression[] = [];
  const rules = parse(await readFile(join(DEPLOY, 'prometheus/alerts.yml'), 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
  for (const rule of rules.groups.flatMap((g) => g.rules)) out.push({ where: `alert ${rule.alert}`, expr: rule.expr });
  const dashboard = JSON.parse(await readFile(join(DEPLOY, 'grafana/redpoint-dashboard.json'), 'utf8')) as Dashboard;
  for (const panel of dashboard.panels) for (const target of panel.targets ?? []) out.push({ where: `panel "${panel.title}" ${target.refId}`, expr: grafanaToPromql(target.expr) });
  for (const variable of dashboard.templating.list) {
    const labelValues = /^label_values\((\w+),\s*\w+\)$/.exec(variable.definition ?? '');
    if (variable.type === 'query') {
      expect(labelValues, `variable ${variable.name}`).not.toBeNull();
      out.push({ where: `variable ${variable.name}`, expr: labelValues?.[1] ?? '' });
    }
  }
  return out;
}

interface Dashboard {
  panels: Array<{ id: number; type: string; title: string; datasource?: { uid: string }; gridPos: { x: number; w: number }; targets?: Array<{ refId: string; expr: string; datasource?: { uid: string } }> }>;
  templating: { list: Array<{ name: string; type: string; definition?: string }> };
}

/** Grafana's variables, as Prometheus would receive them. */
function grafanaToPromql(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m').replaceAll('$__interval', '1m');
}

/** Parses with Prometheus's own PromQL grammar (lezer); throws on a syntax error. */
function selectors({ where, expr }: Expression): Selector[] {
  const tree = parser.parse(expr);
  const found: Selector[] = [];
  let error: number | undefined;
  tree.iterate({
    enter: (node) => {
      if (node.type.isError && error === undefined) error = node.from;
      if (node.name !== 'VectorSelector') return;
      const name = node.node.getChild('Identifier');
      const equals: Array<[string, string]> = [];
      for (const matcher of node.node.getChild('LabelMatchers')?.getChildren('UnquotedLabelMatcher') ?? []) {
        const label = matcher.getChild('LabelName');
        const op = matcher.getChild('MatchOp');
        const value = matcher.getChild('StringLiteral');
        if (label && op && value && expr.slice(op.from, op.to) === '=') equals.push([expr.slice(label.from, label.to), JSON.parse(expr.slice(value.from, value.to)) as string]);
      }
      if (name) found.push({ where, metric: expr.slice(name.from, name.to), equals });
    },
  });
  if (error !== undefined) throw new Error(`${where}: PromQL syntax error at ${error}: ${expr.slice(0, error)} ⟨here⟩ ${expr.slice(error)}`);
  return found;
}

/** Metric names a /metrics exposition declares, with the series names histograms and summaries add. */
function exposed(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (!name) continue;
    names.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

const run = promisify(execFile);

async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd: join(DEPLOY, 'prometheus') });
    return stdout + stderr;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (e.code === 'ENOENT') throw new Error('promtool not found: install Debian\'s prometheus package (apt-get install -y --no-install-recommends prometheus); the test never skips');
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

describe('deploy kit: dashboard and alert rules', () => {
  let server: TestServer;
  let metrics: Set<string>;
  beforeAll(async () => {
    server = await startTestServer();
    const res = await server.request('GET', '/metrics', { auth: 'none' });
    expect(res.status).toBe(200);
    metrics = exposed(res.text);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('every expression parses, and every metric it uses is in /metrics', async () => {
    const all = (await expressions()).flatMap(selectors);
    expect(new Set(all.map((s) => s.where)).size).toBeGreaterThan(30);
    const missing = all.filter((s) => !metrics.has(s.metric) && !MADE_BY_PROMETHEUS.has(s.metric)).map((s) => `${s.where}: ${s.metric}`);
    expect(missing).toEqual([]);
    // The check itself is not vacuous: the metrics a server exports are found, a made-up one is not.
    expect(metrics.has('redpoint_http_request_duration_seconds_bucket')).toBe(true);
    expect(metrics.has('redpoint_no_such_metric_total')).toBe(false);
  });

  it('route, code and reason labels name routes, error codes and close reasons that exist', async () => {
    const routes = new Set([...ENDPOINTS.map((e) => e.path), ...OTHER_ROUTES]);
    const known: Record<string, Set<string>> = { route: routes, code: new Set(Object.keys(ERROR_CODES)), reason: new Set(Object.keys(CLOSE_CODES)) };
    const wrong: string[] = [];
    for (const s of (await expressions()).flatMap(selectors)) {
      for (const [label, value] of s.equals) if (known[label] && !known[label].has(value)) wrong.push(`${s.where}: ${label}="${value}"`);
    }
    expect(wrong).toEqual([]);
  });

  it('the dashboard is well-formed: unique ids, every panel on the chosen data source and within the grid', async () => {
    const dashboard = JSON.parse(await readFile(join(DEPLOY, 'grafana/redpoint-dashboard.json'), 'utf8')) as Dashboard;
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      expect(panel.datasource?.uid, panel.title).toBe('${datasource}');
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
    }
  });

  it('promtool accepts the rules and the Prometheus config, and the rules\' unit tests pass', async () => {
    expect(await promtool('check', 'rules', 'alerts.yml')).toMatch(/SUCCESS: \d+ rules found/);
    expect(await promtool('check', 'config', 'prometheus.yml')).toMatch(/is valid prometheus config file syntax/);
    expect(await promtool('test', 'rules', 'alerts.test.yml')).toMatch(/SUCCESS/);
  });

  it('the unread-summary alert fires above 0.5% non-2xx on its route', async () => {
    const rules = parse(await readFile(join(DEPLOY, 'prometheus/alerts.yml'), 'utf8')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
    const rule = rules.groups.flatMap((g) => g.rules).find((r) => r.alert === 'RedpointUnreadSummaryFailures');
    expect(rule?.expr).toMatch(/route="\/v1\/users\/:uid\/unread", status!~"2\.\."/);
    expect(rule?.expr).toMatch(/> 0\.005\s*$/);
  });
});
