/** Plain DOM building: the page has no framework. */

type Attrs = Record<string, string | boolean | undefined>;

export function h(tag: string, attrs: Attrs = {}, ...children: Array<Node | string | null>): HTMLElement {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (key === 'class') el.className = String(value);
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children) if (child !== null) el.append(child);
  return el;
}

export const byId = (id: string): HTMLElement => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} missing from index.html`);
  return el;
};

/** An inline icon (24×24 path data), hidden from screen readers: the button or text beside it names it. */
export function icon(path: string, className = 'icon'): SVGSVGElement {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('class', className);
  svg.setAttribute('aria-hidden', 'true');
  const p = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  p.setAttribute('d', path);
  svg.append(p);
  return svg;
}

export const ICONS = {
  chevron: 'M7 10l5 5 5-5',
  back: 'M15 5l-7 7 7 7',
  muted: 'M11 5L6 9H3v6h3l5 4zM16 9l5 6M21 9l-5 6',
  bell: 'M6 16v-5a6 6 0 0 1 12 0v5l2 2H4zM10 20a2 2 0 0 0 4 0',
  tools: 'M4 6h16M4 12h16M4 18h16M8 4v4M16 10v4M10 16v4',
  close: 'M6 6l12 12M18 6L6 18',
} as const;

export const count = (n: number): string => (n > 99 ? '99+' : String(n));
