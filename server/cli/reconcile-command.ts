import { addPage, emptyPage, type ReconcilePage } from '../admin/reconcile.js';
import type { Toolbox } from '../admin/toolbox.js';
import { pacedWalk } from './progress.js';
import { findingsReport } from './report.js';

export interface ReconcileArgs {
  users: string[];
  convs: string[];
  all: boolean;
  repair: boolean;
  /** Ids checked per second. */
  rate: number;
  graceMs: number;
  cursor: string;
  json: boolean;
  progress: boolean;
}

const PAGE = 200;

/** `redpoint reconcile`: returns the exit code (0: nothing left wrong, 1: findings remain). */
export async function reconcileCommand(toolbox: Toolbox, args: ReconcileArgs, out: (text: string) => void, interrupted: () => boolean): Promise<number> {
  const started = performance.now();
  const total = emptyPage();
  const add = (page: ReconcilePage): void => addPage(total, page);
  const base = { repair: args.repair, graceMs: args.graceMs };
  if (args.users.length > 0) add(await toolbox.reconcile({ ...base, users: args.users }));
  if (args.convs.length > 0) add(await toolbox.reconcile({ ...base, conversations: args.convs }));
  let cursor = '';
  if (args.all) {
    const expected = args.progress ? (await toolbox.count('users')) + (await toolbox.count('conversations')) : 0;
    cursor = await pacedWalk(
      { label: 'reconcile', progress: args.progress, expected, rate: args.rate, cursor: args.cursor, started },
      (from) => toolbox.reconcile({ ...base, cursor: from, count: PAGE }),
      (page) => {
        add(page);
        return { done: total.users + total.conversations, findings: total.findings.length };
      },
      interrupted,
    );
  }
  const seconds = (performance.now() - started) / 1000;
  if (args.json) {
    out(`${JSON.stringify({ ...total, cursor, seconds }, null, 2)}\n`);
  } else {
    let text = `checked ${plural(total.users, 'user')} and ${plural(total.conversations, 'conversation')} in ${seconds.toFixed(1)} s (${Math.round((total.users + total.conversations) / Math.max(seconds, 0.001))}/s)\n`;
    if (total.midRewrite > 0) text += `conversations seen mid-rewrite that finished within the grace period (not findings): ${total.midRewrite}\n`;
    text += findingsReport(total.findings, 'findings');
    if (args.repair) {
      text += `repaired: ${total.repaired.length}\n`;
      if (total.unrepaired.length > 0) text += findingsReport(total.unrepaired, 'NOT repaired');
    }
    if (cursor !== '') text += `interrupted: resume with --cursor ${cursor}\n`;
    out(text);
  }
  return total.unrepaired.length > 0 ? 1 : 0;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}
