import { setTimeout as sleep } from 'node:timers/promises';
import { adminOf } from '../engine/admin.js';
import { addDbPage, DB_FINDING_KINDS, DbReconciler, emptyDbPage } from '../durable/db-reconcile.js';
import { withDurableEngine } from './durable-connect.js';
import { progressBar, rateSince } from './progress.js';
import { findingsReport } from './report.js';
import type { ReconcileArgs } from './reconcile-command.js';

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
      const bar = args.progress ? progressBar('reconcile --against-db', 'ids') : undefined;
      bar?.start(0, 0, { rate: 0, detail: '' });
      cursor = args.cursor;
      do {
        const pageStarted = performance.now();
        const page = await reconciler.page(cursor, PAGE);
        addDbPage(total, page);
        cursor = page.cursor;
        const done = total.users + total.conversations;
        bar?.setTotal(done);
        bar?.update(done, { rate: rateSince(started, done), detail: `${total.findings.length} findings | cursor ${cursor === '' ? 'done' : cursor}` });
        const budget = ((page.users + page.conversations) / args.rate) * 1000 - (performance.now() - pageStarted);
        if (budget > 0 && cursor !== '') await sleep(budget);
      } while (cursor !== '' && !interrupted());
      bar?.stop();
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
