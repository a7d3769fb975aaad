/**
 * Runs inside the demo page (bundled and injected by ../layout.ts; type-checked with the DOM by
 * tsconfig.browser.json): reads boxes and computed styles and returns the problems it finds as
 * sentences, so that a failing test says what is wrong where.
 */

const round = (n: number): number => Math.round(n * 10) / 10;
const at = (b: DOMRect): string => `[x ${round(b.left)}..${round(b.right)}, y ${round(b.top)}..${round(b.bottom)}]`;
const overlap = (a: DOMRect, b: DOMRect): boolean =>
  Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
const inside = (a: DOMRect, b: DOMRect): boolean => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5;
const viewportWidth = (): number => document.documentElement.clientWidth;

/** Parts of one region: sized, within the viewport's width, inside `container`, none overlapping another. */
function region(problems: string[], what: string, container: Element | null, parts: Array<[string, Element]>): void {
  const outer = container?.getBoundingClientRect();
  const vw = viewportWidth();
  const boxes = parts.map(([name, el]) => ({ name, box: el.getBoundingClientRect() }));
  for (const { name, box } of boxes) {
    if (box.width < 1 || box.height < 1) problems.push(`${what}: ${name} has no size ${at(box)}`);
    if (box.left < -0.5 || box.right > vw + 0.5) problems.push(`${what}: ${name} ${at(box)} is outside the viewport (width ${vw})`);
    if (outer && !inside(box, outer)) problems.push(`${what}: ${name} ${at(box)} sticks out of its box ${at(outer)}`);
  }
  for (const [i, a] of boxes.entries()) {
    for (const b of boxes.slice(i + 1)) if (overlap(a.box, b.box)) problems.push(`${what}: ${a.name} ${at(a.box)} overlaps ${b.name} ${at(b.box)}`);
  }
}

/** Content wider or taller than its element spills over the neighbours, unless the element clips it (an ellipsis). */
function fits(problems: string[], what: string, name: string, el: Element): void {
  const { overflowX, overflowY } = getComputedStyle(el);
  const spillsX = overflowX === 'visible' && el.scrollWidth > el.clientWidth + 1;
  const spillsY = overflowY === 'visible' && el.scrollHeight > el.clientHeight + 1;
  if (spillsX || spillsY) {
    problems.push(`${what}: the content of ${name} (${el.scrollWidth}×${el.scrollHeight}) overflows it (${el.clientWidth}×${el.clientHeight})`);
  }
}

/** The parts of `root` that `selectors` name; the `required` ones missing are problems. */
function parts(problems: string[], what: string, root: ParentNode | null, selectors: Array<[string, string]>, required: string[]): Array<[string, Element]> {
  const found: Array<[string, Element]> = [];
  for (const [name, selector] of selectors) {
    const el = root?.querySelector(selector);
    if (el) found.push([name, el]);
    else if (required.includes(name)) problems.push(`${what}: no ${name} (${selector})`);
  }
  return found;
}

/**
 * Sideways scrolling; the header's parts; per conversation row its avatar, name, muted tag,
 * subtitle, marks and buttons (inside the row and the viewport, apart, no text spilling out of
 * its box, at least `minName` px of the name showing, or all of it); rows apart; the test-tool
 * cards inside the viewport.
 */
function layout(minName: number): string[] {
  const problems: string[] = [];
  const vw = viewportWidth();
  const scroller = document.scrollingElement ?? document.documentElement;
  if (scroller.scrollWidth > vw) problems.push(`the page scrolls sideways: scrollWidth ${scroller.scrollWidth} > viewport ${vw}`);

  const topbar = document.querySelector('.topbar');
  const header: Array<[string, string]> = [
    ['brand', '.brand'],
    ['user', '#who'],
    ['badge', '#total'],
    ['connection', '#connection'],
  ];
  const headerParts = parts(
    problems,
    'header',
    topbar,
    header,
    header.map(([name]) => name),
  );
  region(problems, 'header', topbar, headerParts);
  for (const [name, el] of headerParts) fits(problems, 'header', name, el);

  // A phone shows the list or the open conversation, not both.
  const list = document.querySelector('#conversations');
  const rows = list && rendered(list) ? [...list.querySelectorAll(':scope > li[data-conv]')] : [];
  const pane = document.querySelector('#conversation');
  if (pane && rendered(pane)) paneLayout(problems, pane);
  else if (rows.length === 0) problems.push('no conversation rows');
  for (const row of rows) {
    const what = `row ${row.getAttribute('data-conv')}`;
    const found = parts(
      problems,
      what,
      row,
      [
        ['avatar', '.avatar'],
        ['name', '.conv-name'],
        ['muted tag', '[data-role="muted"]'],
        ['mentions-only tag', '[data-role="level"]'],
        ['time', '[data-role="time"]'],
        ['subtitle', '.conv-sub'],
        ['mentions', '[data-role="mention"]'],
        ['unread count', '[data-role="unread"]'],
        ['marked dot', '[data-role="marked"]'],
      ],
      ['avatar', 'name', 'subtitle'],
    );
    // The row's parts sit in its one big button (that opens it); beside it the menu's trigger, shown or not.
    if (!row.querySelector('button[data-action="menu"][aria-haspopup="menu"]')) problems.push(`${what}: no menu button`);
    const buttons = rowButtons(row).map((b): [string, Element] => [`button ${b.getAttribute('aria-label') ?? b.textContent}`, b]);
    region(problems, what, row, [...found, ...buttons]);
    const menu = row.querySelector('[role="menu"]');
    if (menu && rendered(menu)) {
      region(problems, `${what} menu`, null, [['menu', menu]]);
      region(
        problems,
        `${what} menu`,
        menu,
        [...menu.querySelectorAll('[role="menuitem"]')].map((item): [string, Element] => [`item ${item.textContent}`, item]),
      );
    }
    for (const [name, el] of [...found, ...buttons]) if (name !== 'avatar' && name !== 'marked dot') fits(problems, what, name, el);
    const nameEl = row.querySelector('.conv-name');
    if (nameEl) {
      // scrollWidth: the whole name; clientWidth: the part its box shows (the rest is cut).
      const shown = Math.min(nameEl.clientWidth, nameEl.scrollWidth);
      if (shown < Math.min(nameEl.scrollWidth, minName)) {
        problems.push(`${what}: only ${shown} px of the name show (of ${nameEl.scrollWidth} px; at least ${minName} px or all of it should)`);
      }
    }
  }
  region(
    problems,
    'conversation list',
    document.querySelector('#conversations'),
    rows.map((row) => [`row ${row.getAttribute('data-conv')}`, row]),
  );
  region(
    problems,
    'test tools',
    null,
    [...document.querySelectorAll('.panel > .card')].filter(rendered).map((card, i) => [`card ${i + 1}`, card]),
  );
  return problems;
}

/** The open conversation: its header's parts apart and on screen, its messages inside the viewport's width. */
function paneLayout(problems: string[], pane: Element): void {
  const head = pane.querySelector('.pane-head');
  const found = parts(
    problems,
    'conversation header',
    head,
    [
      ['back', '[data-action="back"]'],
      ['avatar', '.avatar'],
      ['title', '[data-role="title"]'],
      ['menu button', '[data-action="menu"]'],
    ],
    ['avatar', 'title', 'menu button'],
  ).filter(([, el]) => rendered(el));
  region(problems, 'conversation header', head, found);
  fits(problems, 'conversation header', 'title', pane.querySelector('[data-role="title"]') ?? pane);
  region(
    problems,
    'conversation',
    null,
    [...pane.querySelectorAll('[data-role="facts"] > *, [data-role="message"]')].map((el, i): [string, Element] => [
      `${el.getAttribute('data-role')} ${i + 1}`,
      el,
    ]),
  );
}

/** `selector` is on screen and not covered: in the viewport, clear of the header bar and of `clearOf`, and hit at its centre. */
function cover(selector: string, clearOf: string[]): string[] {
  const el = document.querySelector(selector);
  if (!el) return [`${selector} is not in the page`];
  const b = el.getBoundingClientRect();
  const problems: string[] = [];
  if (b.width < 1 || b.height < 1) problems.push(`${selector} has no size`);
  if (b.top < -0.5 || b.bottom > innerHeight + 0.5 || b.left < -0.5 || b.right > viewportWidth() + 0.5) {
    problems.push(`${selector} ${at(b)} is not inside the viewport (${viewportWidth()}×${innerHeight})`);
  }
  for (const other of ['.topbar', ...clearOf]) {
    const o = document.querySelector(other);
    if (o && overlap(b, o.getBoundingClientRect())) problems.push(`${selector} ${at(b)} overlaps ${other} ${at(o.getBoundingClientRect())}`);
  }
  const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
  if (!hit || !el.contains(hit)) problems.push(`${selector} is covered at its centre by ${hit ? `${hit.tagName.toLowerCase()}.${hit.className}` : 'nothing'}`);
  return problems;
}

type Rgba = [number, number, number, number];

function parse(css: string): Rgba {
  const m = css.match(/rgba?\(([^)]+)\)/);
  if (!m?.[1]) throw new Error(`unexpected colour ${css}`);
  const [r = 0, g = 0, b = 0, a = 1] = m[1]
    .split(/[\s,/]+/)
    .filter(Boolean)
    .map(Number);
  return [r, g, b, a];
}

/** `top` painted over the opaque `under`. */
function over(top: Rgba, under: Rgba): Rgba {
  const a = top[3];
  return [top[0] * a + under[0] * (1 - a), top[1] * a + under[1] * (1 - a), top[2] * a + under[2] * (1 - a), 1];
}

/** WCAG 2 contrast ratio of two opaque colours. */
function contrast(a: Rgba, b: Rgba): number {
  const luminance = ([r, g, bl]: Rgba): number => {
    const lin = (c: number): number => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(bl);
  };
  const [la, lb] = [luminance(a), luminance(b)];
  return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
}

/** What is painted behind `el`: its ancestors' background colours, over white. */
function behind(el: Element): Rgba {
  const layers: Rgba[] = [];
  for (let e = el.parentElement; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  return layers.reduceRight<Rgba>((under, top) => over(top, under), [255, 255, 255, 1]);
}

/**
 * Each conversation button showing (a menu's trigger) reads as a button at rest: cursor pointer, fully opaque,
 * an edge that stands out from the row (a fill, or a border, of its own), and a legible label
 * (WCAG AA, 4.5:1) on its fill.
 */
function buttons(): string[] {
  const problems: string[] = [];
  const all = [...document.querySelectorAll('#conversations li')].flatMap(rowButtons);
  if (all.length === 0) problems.push('no conversation buttons');
  for (const button of all) {
    const what = `${button.closest('li')?.getAttribute('data-conv')} / ${button.getAttribute('aria-label') ?? button.textContent}`;
    const style = getComputedStyle(button);
    if (style.cursor !== 'pointer') problems.push(`${what}: cursor is ${style.cursor}, not pointer`);
    let opacity = 1;
    for (let e: Element | null = button; e; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity);
    if (opacity < 0.99) problems.push(`${what}: drawn at opacity ${opacity.toFixed(2)} (looks disabled)`);
    const row = behind(button);
    const fill = over(parse(style.backgroundColor), row);
    const borderPx = style.borderTopStyle === 'none' ? 0 : Number.parseFloat(style.borderTopWidth);
    const fillEdge = contrast(fill, row);
    const borderEdge = borderPx >= 1 ? contrast(over(parse(style.borderTopColor), row), row) : 1;
    if (fillEdge < 1.1 && borderEdge < 1.3) {
      problems.push(
        `${what}: no visible edge at rest (fill contrast ${fillEdge.toFixed(2)} < 1.1; ${borderPx} px border, contrast ${borderEdge.toFixed(2)} < 1.3)`,
      );
    }
    const label = contrast(over(parse(style.color), fill), fill);
    if (label < 4.5) problems.push(`${what}: label contrast ${label.toFixed(2)} < 4.5`);
  }
  return problems;
}

/** Scrolls the page to `y` (clamped by the browser); returns where it is. */
function scrollToY(y: number): number {
  window.scrollTo(0, y);
  return window.scrollY;
}

/** The whole text of `selector` shows (nothing cut off at its end). */
function whole(selector: string): boolean {
  const el = document.querySelector(selector);
  return el !== null && el.scrollWidth <= el.clientWidth;
}

/** Heights of the elements `selector` matches that are rendered (not display: none). */
function heights(selector: string): number[] {
  return [...document.querySelectorAll(selector)].filter(rendered).map((el) => el.getBoundingClientRect().height);
}

/** Laid out at all: an element under display: none (a closed menu) has no boxes. */
function rendered(el: Element): boolean {
  return el.getClientRects().length > 0;
}

/** A row's buttons that show as buttons: not the row itself (the button that opens it), not a menu's items, not hidden. */
function rowButtons(row: Element): Element[] {
  return [...row.querySelectorAll('button[data-action]')].filter(
    (b) => rendered(b) && getComputedStyle(b).visibility === 'visible' && b.getAttribute('data-action') !== 'open' && !b.closest('[role="menu"]'),
  );
}

Object.assign(globalThis, { layoutProbe: { layout, cover, buttons, scrollToY, whole, heights } });
