/**
 * A string-keyed table of text values that costs V8's garbage collector as few objects as
 * possible: while it holds at most SMALL_TABLE entries it is ONE flat string,
 * `\n<key>;<value>\n<key>;<value>…`, and only a larger one is a Map (whose values are still flat
 * strings, one object each). The memory engine keeps every user's records and every
 * conversation's member tags in these: with 100k users resident, a Map per user and an object
 * per entry were most of the millions of objects each full GC had to mark.
 *
 * Keys are ids (ID_PATTERN: never `;` or a newline); values are never empty and never hold a
 * newline. Entries keep
 * insertion order, a replaced value keeps its place, exactly as a Map's do.
 */
export type TextTable = string | Map<string, string>;

export const EMPTY_TABLE: TextTable = '';

/** Small enough that a linear search and a rebuilt string per write cost less than a Map. */
export const SMALL_TABLE = 8;

/** Where the value of `key` starts and ends in a small table (start -1: absent). */
function locate(text: string, key: string): { start: number; end: number } {
  const at = text.indexOf(`\n${key};`);
  if (at < 0) return { start: -1, end: -1 };
  const start = at + key.length + 2;
  const next = text.indexOf('\n', start);
  return { start, end: next < 0 ? text.length : next };
}

export function tableGet(table: TextTable, key: string): string | undefined {
  if (typeof table !== 'string') return table.get(key);
  const { start, end } = locate(table, key);
  return start < 0 ? undefined : table.slice(start, end);
}

export function tableHas(table: TextTable, key: string): boolean {
  return typeof table === 'string' ? table.includes(`\n${key};`) : table.has(key);
}

export function tableSize(table: TextTable): number {
  if (typeof table !== 'string') return table.size;
  let n = 0;
  for (let i = table.indexOf('\n'); i >= 0; i = table.indexOf('\n', i + 1)) n++;
  return n;
}

/** The table with `key` set to `value`: a new string while small (join() makes it flat: one object, no rope). */
export function tableSet(table: TextTable, key: string, value: string): TextTable {
  if (typeof table !== 'string') {
    table.set(key, value);
    return table;
  }
  const { start, end } = locate(table, key);
  if (start >= 0) return [table.slice(0, start), value, table.slice(end)].join('');
  if (tableSize(table) < SMALL_TABLE) return [table, '\n', key, ';', value].join('');
  const map = new Map(tableEntries(table).map(([k, v]) => [flatCopy(k), flatCopy(v)]));
  map.set(key, value);
  return map;
}

/** The table without `key`. */
export function tableDelete(table: TextTable, key: string): TextTable {
  if (typeof table !== 'string') {
    table.delete(key);
    return table;
  }
  const at = table.indexOf(`\n${key};`);
  if (at < 0) return table;
  const next = table.indexOf('\n', at + 1);
  if (next < 0) return flatCopy(table.slice(0, at));
  return at === 0 ? flatCopy(table.slice(next)) : [table.slice(0, at), table.slice(next)].join('');
}

/** Calls `visit` with each entry in order, making no pair per entry (a pull visits all of a user's records). */
export function tableForEach(table: TextTable, visit: (value: string, key: string) => void): void {
  if (typeof table !== 'string') {
    table.forEach(visit);
    return;
  }
  for (let at = table.indexOf('\n'); at >= 0; ) {
    const next = table.indexOf('\n', at + 1);
    const semi = table.indexOf(';', at);
    visit(table.slice(semi + 1, next < 0 ? table.length : next), table.slice(at + 1, semi));
    at = next;
  }
}

/** The entries in order, as fresh arrays (for the paths that visit a whole table). */
export function tableEntries(table: TextTable): Array<[string, string]> {
  if (typeof table !== 'string') return [...table];
  const out: Array<[string, string]> = [];
  for (let at = table.indexOf('\n'); at >= 0; ) {
    const next = table.indexOf('\n', at + 1);
    const end = next < 0 ? table.length : next;
    const semi = table.indexOf(';', at);
    out.push([table.slice(at + 1, semi), table.slice(semi + 1, end)]);
    at = next;
  }
  return out;
}

/** The keys in order (every message to a write-diffused conversation lists its members: no pairs made). */
export function tableKeys(table: TextTable): string[] {
  if (typeof table !== 'string') return [...table.keys()];
  const out: string[] = [];
  for (let at = table.indexOf('\n'); at >= 0; at = table.indexOf('\n', at + 1)) out.push(table.slice(at + 1, table.indexOf(';', at)));
  return out;
}

export function tableValues(table: TextTable): string[] {
  if (typeof table !== 'string') return [...table.values()];
  return tableEntries(table).map(([, v]) => v);
}

/** A copy of the table that later writes to either do not reach (a small table is immutable already). */
export function tableCopy(table: TextTable): TextTable {
  return typeof table === 'string' ? table : new Map(table);
}

/**
 * A flat copy of a substring. V8 makes a slice of 13 or more characters a view that keeps its
 * whole parent alive; a kept key or value must not pin the string it came from. (A join of two
 * non-empty parts is always a new flat string; joining one part, or adding '', returns the view.)
 */
export function flatCopy(s: string): string {
  return s.length < 13 ? s : [s.slice(0, 1), s.slice(1)].join('');
}
