/**
 * A small horizontal grouped bar chart as SVG text, log-scaled (latencies span orders of
 * magnitude between a raw publish and a saturated server). No chart library.
 */
export interface ChartSeries {
  name: string;
  color: string;
}

export interface ChartRow {
  label: string;
  /** One value per series; NaN draws nothing. */
  values: number[];
}

export interface ChartGroup {
  title: string;
  rows: ChartRow[];
}

export interface BarChart {
  title: string;
  subtitle: string;
  unit: string;
  series: ChartSeries[];
  groups: ChartGroup[];
}

const WIDTH = 960;
const LABEL_W = 170;
const PLOT_X = LABEL_W + 10;
const PLOT_W = WIDTH - PLOT_X - 70;
const BAR_H = 9;
const BAR_GAP = 2;
const ROW_PAD = 6;
const GROUP_TITLE_H = 22;
const TOP = 64;
export const FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"';

export function renderBarChart(chart: BarChart): string {
  const values = chart.groups.flatMap((g) => g.rows.flatMap((r) => r.values)).filter((v) => Number.isFinite(v) && v > 0);
  const lo = niceBelow(Math.min(...values, 1) / 1.6);
  const hi = niceAbove(Math.max(...values, lo * 10) * 1.15);
  const x = (v: number): number => PLOT_X + (PLOT_W * Math.log10(v / lo)) / Math.log10(hi / lo);
  const rowH = chart.series.length * (BAR_H + BAR_GAP) + ROW_PAD;

  const body: string[] = [];
  let y = TOP;
  for (const group of chart.groups) {
    body.push(svgText(8, y + 15, group.title, 'font-size="13" font-weight="600" fill="#222"'));
    y += GROUP_TITLE_H;
    for (const row of group.rows) {
      body.push(svgText(LABEL_W, y + rowH / 2 + 1, row.label, 'font-size="12" text-anchor="end" fill="#333"'));
      row.values.forEach((v, i) => {
        const top = y + i * (BAR_H + BAR_GAP);
        if (!Number.isFinite(v) || v <= 0) return;
        const color = chart.series[i]?.color ?? '#888';
        const end = x(Math.max(v, lo));
        body.push(`<rect x="${PLOT_X}" y="${top}" width="${(end - PLOT_X).toFixed(1)}" height="${BAR_H}" fill="${color}" rx="1"/>`);
        body.push(svgText(end + 4, top + BAR_H - 1, formatValue(v), 'font-size="9.5" fill="#444"'));
      });
      y += rowH;
    }
    y += 8;
  }
  const height = y + 30;

  const grid: string[] = [];
  for (const v of niceSteps(lo, hi)) {
    const gx = x(v).toFixed(1);
    const major = Math.abs(Math.log10(v) - Math.round(Math.log10(v))) < 1e-9;
    grid.push(`<line x1="${gx}" y1="${TOP - 4}" x2="${gx}" y2="${y}" stroke="${major ? '#ccc' : '#eee'}" stroke-width="1"/>`);
    grid.push(svgText(Number(gx), y + 14, String(Number(v.toPrecision(1))), `font-size="10" text-anchor="middle" fill="${major ? '#555' : '#999'}"`));
  }

  const legend = chart.series.map((s, i) => {
    const lx = PLOT_X + i * 90;
    return `<rect x="${lx}" y="38" width="12" height="10" fill="${s.color}"/>${svgText(lx + 16, 47, s.name, 'font-size="12" fill="#333"')}`;
  });

  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" ${FONT}>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    svgText(8, 20, chart.title, 'font-size="16" font-weight="700" fill="#111"'),
    svgText(8, 34, chart.subtitle, 'font-size="11" fill="#666"'),
    ...legend,
    svgText(WIDTH - 8, 47, `${chart.unit}, log scale`, 'font-size="11" text-anchor="end" fill="#666"'),
    ...grid,
    ...body,
    '</svg>',
    '',
  ].join('\n');
}

/** 1-2-5 steps (…, 0.5, 1, 2, 5, 10, …) from lo to hi. */
function niceSteps(lo: number, hi: number): number[] {
  const out: number[] = [];
  for (let decade = 10 ** Math.floor(Math.log10(lo)); decade <= hi; decade *= 10) {
    for (const m of [1, 2, 5]) {
      const v = Number((decade * m).toPrecision(1));
      if (v >= lo * 0.9999 && v <= hi * 1.0001) out.push(v);
    }
  }
  return out;
}

function niceBelow(v: number): number {
  const decade = 10 ** Math.floor(Math.log10(v));
  return [5, 2, 1].map((m) => m * decade).find((c) => c <= v) ?? decade;
}

function niceAbove(v: number): number {
  const decade = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * decade).find((c) => c >= v) ?? 10 * decade;
}

function formatValue(v: number): string {
  if (v >= 100) return v.toFixed(0);
  if (v >= 10) return v.toFixed(1);
  if (v >= 0.1) return v.toFixed(2).replace(/0$/, '');
  return v.toPrecision(1);
}

export function svgText(x: number, y: number, content: string, attrs: string): string {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${escapeXml(content)}</text>`;
}

function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
