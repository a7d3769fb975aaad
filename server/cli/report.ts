import { FINDING_KINDS, type Finding } from '../admin/checks.js';

/** Examples shown per kind of finding. */
const EXAMPLES = 3;

/** What a report lists: a finding of the store's invariants (checks.ts) or against the database (db-reconcile.ts). */
interface Reported<K extends string> {
  kind: K;
  uid?: string | undefined;
  conv?: string | undefined;
  detail: string;
}

/** Findings by kind with a description and a few examples, one block of text. */
export function findingsReport<K extends string = Finding['kind']>(
  findings: readonly Reported<K>[],
  title: string,
  kinds: Readonly<Record<K, string>> = FINDING_KINDS as Readonly<Record<string, string>>,
): string {
  if (findings.length === 0) return `${title}: none\n`;
  const byKind = new Map<K, Reported<K>[]>();
  for (const f of findings) {
    const list = byKind.get(f.kind);
    if (list) list.push(f);
    else byKind.set(f.kind, [f]);
  }
  let out = `${title}: ${findings.length}\n`;
  for (const [kind, list] of [...byKind].sort((a, b) => b[1].length - a[1].length)) {
    out += `  ${kind.padEnd(20)} ${String(list.length).padStart(8)}  ${kinds[kind]}\n`;
    for (const f of list.slice(0, EXAMPLES)) out += `      ${subject(f)}: ${f.detail}\n`;
    if (list.length > EXAMPLES) out += `      ... and ${list.length - EXAMPLES} more\n`;
  }
  return out;
}

export function subject(f: Reported<string>): string {
  if (f.uid !== undefined && f.conv !== undefined) return `user ${f.uid} in ${f.conv}`;
  if (f.uid !== undefined) return `user ${f.uid}`;
  return `conversation ${f.conv ?? '?'}`;
}

/** A table of rows (first row: header), columns padded to their widest cell. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) {
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length);
  }
  return `${rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}
