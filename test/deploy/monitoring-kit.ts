import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { parse } from 'yaml';

/**
 * The deploy kit's monitoring files as data, for test/deploy/monitoring.test.ts: the alert rules,
 * their unit tests and the Grafana dashboard, every PromQL expression in them with the selectors
 * it uses (parsed with Prometheus's own grammar), and a /metrics exposition's names and label
 * values.
 */

export const DEPLOY = join(import.meta.dirname, '../../deploy');
/** The promtool unit-test files of the rules, in deploy/prometheus/. */
export const RULE_TEST_FILES = ['alerts.test.yml', 'alerts-days.test.yml'];

export interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface Dashboard {
  panels: Array<{
    id: number;
    type: string;
    title: string;
    datasource?: { uid: string };
    gridPos: { x: number; y: number; w: number; h: number };
    targets?: Array<{ refId: string; expr: string; datasource?: { uid: string } }>;
  }>;
  templating: { list: Array<{ name: string; type: string; definition?: string }> };
}

interface RuleTests {
  tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts: unknown[] }> }>;
}

export interface Expression {
  where: string;
  expr: string;
}

export interface Selector {
  where: string;
  metric: string;
  /**
   * `name="value"` matchers, and each alternative of a `name=~"a|b"` matcher whose alternatives
   * are plain words (a pattern such as `5..` says nothing about which values exist).
   */
  equals: Array<[string, string]>;
}

async function yamlFile<T>(path: string): Promise<T> {
  return parse(await readFile(join(DEPLOY, path), 'utf8')) as T;
}

export async function rules(): Promise<Rule[]> {
  const file = await yamlFile<{ groups: Array<{ rules: Rule[] }> }>('prometheus/alerts.yml');
  return file.groups.flatMap((g) => g.rules);
}

export async function dashboard(): Promise<Dashboard> {
  return JSON.parse(await readFile(join(DEPLOY, 'grafana/redpoint-dashboard.json'), 'utf8')) as Dashboard;
}

/** The scrape jobs of deploy/prometheus/prometheus.yml: the values of the `job` label. */
export async function scrapeJobs(): Promise<string[]> {
  const config = await yamlFile<{ scrape_configs: Array<{ job_name: string }> }>('prometheus/prometheus.yml');
  return config.scrape_configs.map((c) => c.job_name);
}

/** Per alert, whether the unit tests expect it to fire somewhere, and to stay quiet somewhere. */
export async function ruleTestCases(): Promise<Map<string, { fires: boolean; quiet: boolean }>> {
  const cases = new Map<string, { fires: boolean; quiet: boolean }>();
  for (const file of RULE_TEST_FILES) {
    for (const test of (await yamlFile<RuleTests>(`prometheus/${file}`)).tests) {
      for (const check of test.alert_rule_test ?? []) {
        const seen = cases.get(check.alertname) ?? { fires: false, quiet: false };
        if (check.exp_alerts.length > 0) seen.fires = true;
        else seen.quiet = true;
        cases.set(check.alertname, seen);
      }
    }
  }
  return cases;
}

/** Every PromQL expression of the rules and the dashboard (panels and query variables). */
export async function expressions(): Promise<Expression[]> {
  const out: Expression[] = [];
  for (const rule of await rules()) out.push({ where: `alert ${rule.alert}`, expr: rule.expr });
  const board = await dashboard();
  for (const panel of board.panels)
    for (const target of panel.targets ?? []) out.push({ where: `panel "${panel.title}" ${target.refId}`, expr: grafanaToPromql(target.expr) });
  for (const variable of board.templating.list) {
    if (variable.type !== 'query') continue;
    const labelValues = /^label_values\((\w+),\s*\w+\)$/.exec(variable.definition ?? '');
    if (!labelValues?.[1]) throw new Error(`variable ${variable.name}: not label_values(metric, label): ${variable.definition}`);
    out.push({ where: `variable ${variable.name}`, expr: labelValues[1] });
  }
  return out;
}

/** Grafana's variables, as Prometheus would receive them. */
function grafanaToPromql(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m').replaceAll('$__interval', '1m').replaceAll('$__range', '1h');
}

const PLAIN_ALTERNATIVES = /^[\w:/-]+(\|[\w:/-]+)*$/;

/** Parses with Prometheus's own PromQL grammar (lezer); throws on a syntax error. */
export function selectors({ where, expr }: Expression): Selector[] {
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
        if (!label || !op || !value) continue;
        const labelName = expr.slice(label.from, label.to);
        const text = JSON.parse(expr.slice(value.from, value.to)) as string;
        const operator = expr.slice(op.from, op.to);
        if (operator === '=') equals.push([labelName, text]);
        if (operator === '=~' && PLAIN_ALTERNATIVES.test(text)) for (const alternative of text.split('|')) equals.push([labelName, alternative]);
      }
      if (name) found.push({ where, metric: expr.slice(name.from, name.to), equals });
    },
  });
  if (error !== undefined) throw new Error(`${where}: PromQL syntax error at ${error}: ${expr.slice(0, error)} ⟨here⟩ ${expr.slice(error)}`);
  return found;
}

/** Metric names a /metrics exposition declares, with the series names histograms and summaries add. */
export function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (!name) continue;
    names.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

/** The label values of the series (samples, not HELP/TYPE lines) in an exposition: metric -> label -> values. */
export function exposedLabelValues(text: string): Map<string, Map<string, Set<string>>> {
  const out = new Map<string, Map<string, Set<string>>>();
  for (const [, metric, labels] of text.matchAll(/^([a-zA-Z_:][\w:]*)\{(.*)\} \S+$/gm)) {
    if (!metric || labels === undefined) continue;
    const byLabel = out.get(metric) ?? new Map<string, Set<string>>();
    out.set(metric, byLabel);
    for (const [, label, value] of labels.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      if (!label || value === undefined) continue;
      const values = byLabel.get(label) ?? new Set<string>();
      values.add(value);
      byLabel.set(label, values);
    }
  }
  return out;
}
