import { addDbPage, DB_FINDING_KINDS, DbReconciler, emptyDbPage } from '../durable/db-reconcile.js';
import { adminOf } from '../engine/admin.js';
import { withDurableEngine } from './durable-connect.js';
import { pacedWalk } from './progress.js';
import type { ReconcileArgs } from './reconcile-command.js';
import { findingsReport } from './report.js';

const PAGE = 200;

/**
 * `redpoint reconcile --against-db`: Redis against PostgreSQL (server/durable/db-reconcile.ts),
 * for the named users or the whole store, reached directly like `redpoint restore`. Exit code 0
 * when nothing is left wrong, 1 when findings remain.
 */
export async function dbReconcileCommand(
  args: ReconcileArgs,
  out: (text: string) => void,
  interrupted: () => boolean,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  return withDurableEngine('reconcile --against-db', env, async ({ tier, engine, store }) => {
    const reconciler = new DbReconciler(tier.pg, store, engine, adminOf(engine), { repair: args.repair, graceMs: args.graceMs });
    const started = performance.now();
    const total = emptyDbPage();
    if (args.users.length > 0) addDbPage(total, await reconciler.checkUsers(args.users));
    let cursor = '';
    if (args.all) {
      cursor = await pacedWalk(
        { label: 'reconcile --against-db', progress: args.progress, expected: 0, rate: args.rate, cursor: args.cursor, started },
        (from) => reconciler.page(from, PAGE),
        (page) => {
          addDbPage(total, page);
          return { done: total.users + total.conversations, findings: total.findings.length };
        },
        interrupted,
      );
    }
    const seconds = (performance.now() - started) / 1000;
    if (args.json) out(`${JSON.stringify({ ...total, cursor, seconds }, null, 2)}\n`);
    else {
      let text = `checked ${total.users} users and ${total.conversations} conversations against PostgreSQL in ${seconds.toFixed(1)} s\n`;
      if (total.notInRedis > 0) text += `in PostgreSQL only (restored on first touch, not findings): ${total.notInRedis}\n`;
      text += findingsReport(total.findings, 'findings', DB_FINDING_KINDS);
      if (args.repair) {
        text += `repaired: ${total.repaired.length}\n`;
        if (total.unrepaired.length > 0) text += findingsReport(total.unrepaired, 'NOT repaired', DB_FINDING_KINDS);
      }
      if (cursor !== '') text += `interrupted: resume with --against-db --all --cursor ${cursor}\n`;
      out(text);
    }
    return total.unrepaired.length > 0 ? 1 : 0;
  });
}
