import { FONT, svgText } from './svg-chart.js';

/** A line chart of per-window figures (latency p99 per window, checks per second) as SVG text. */
export interface LineChart {
  title: string;
  subtitle: string;
  xLabel: string;
  yLabel: string;
  series: Array<{ name: string; color: string; points: Array<[number, number]> }>;
}

const WIDTH = 960;
const HEIGHT = 360;
const LEFT = 64;
const RIGHT = 20;
const TOP = 64;
const BOTTOM = 44;

export const LINE_COLORS = ['#3b7dd8', '#e8833a', '#4aa564', '#b5449b'] as const;

export function renderLineChart(chart: LineChart): string {
  const points = chart.series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const xMax = Math.max(1, ...points.map(([x]) => x));
  const yMax = niceCeil(Math.max(1e-9, ...points.map(([, y]) => y)));
  const px = (x: number): number => LEFT + ((WIDTH - LEFT - RIGHT) * x) / xMax;
  const py = (y: number): number => TOP + (HEIGHT - TOP - BOTTOM) * (1 - y / yMax);
  const grid: string[] = [];
  for (let i = 0; i <= 4; i++) {
    const y = (yMax * i) / 4;
    grid.push(`<line x1="${LEFT}" y1="${py(y).toFixed(1)}" x2="${WIDTH - RIGHT}" y2="${py(y).toFixed(1)}" stroke="#eee"/>`);
    grid.push(svgText(LEFT - 6, py(y) + 4, String(Number(y.toPrecision(3))), 'font-size="10" text-anchor="end" fill="#666"'));
  }
  const xStep = niceStep(xMax / 6);
  for (let x = 0; x <= xMax + 1e-9; x += xStep) {
    grid.push(svgText(px(x), HEIGHT - BOTTOM + 16, String(Number(x.toPrecision(6))), 'font-size="10" text-anchor="middle" fill="#666"'));
  }
  const lines = chart.series.map((s) => {
    const d = s.points
      .filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y))
      .map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${px(x).toFixed(1)},${py(y).toFixed(1)}`)
      .join(' ');
    return `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.8"/>`;
  });
  const legend = chart.series.map(
    (s, i) =>
      `<rect x="${LEFT + i * 200}" y="38" width="12" height="10" fill="${s.color}"/>${svgText(LEFT + i * 200 + 16, 47, s.name, 'font-size="12" fill="#333"')}`,
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" ${FONT}>`,
    '<rect width="100%" height="100%" fill="#fff"/>',
    svgText(8, 20, chart.title, 'font-size="16" font-weight="700" fill="#111"'),
    svgText(8, 34, chart.subtitle, 'font-size="11" fill="#666"'),
    ...legend,
    ...grid,
    `<line x1="${LEFT}" y1="${HEIGHT - BOTTOM}" x2="${WIDTH - RIGHT}" y2="${HEIGHT - BOTTOM}" stroke="#999"/>`,
    ...lines,
    svgText((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 8, chart.xLabel, 'font-size="11" text-anchor="middle" fill="#444"'),
    svgText(
      14,
      (TOP + HEIGHT - BOTTOM) / 2,
      chart.yLabel,
      `font-size="11" text-anchor="middle" fill="#444" transform="rotate(-90 14 ${(TOP + HEIGHT - BOTTOM) / 2})"`,
    ),
    '</svg>',
    '',
  ].join('\n');
}

function niceCeil(v: number): number {
  const decade = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * decade).find((c) => c >= v) ?? 10 * decade;
}

/** A 1-2-5 step at or above v (axis ticks at whole seconds, not 2.5). */
function niceStep(v: number): number {
  const decade = 10 ** Math.floor(Math.log10(Math.max(1, v)));
  return [1, 2, 5, 10].map((m) => m * decade).find((c) => c >= v) ?? 10 * decade;
}
