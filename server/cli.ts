import { parseArgs } from 'node:util';
import { connect, UsageError } from './cli/connect.js';
import { dbReconcileCommand } from './cli/db-reconcile-command.js';
import { deleteCommand, eraseCommand, headCommand } from './cli/erase-command.js';
import { importCommand } from './cli/import-command.js';
import { inspectCommand } from './cli/inspect-command.js';
import { rebaseCommand } from './cli/rebase-command.js';
import { reconcileCommand } from './cli/reconcile-command.js';
import { resetReadCommand } from './cli/reset-read-command.js';
import { restoreCommand } from './cli/restore-command.js';
import { ConfigError } from './config.js';

const USAGE = `redpoint: the operator's toolbox (docs/cli.md)

  redpoint reconcile (--all | --user U... | --conv C...) [--repair] [--rate N] [--grace MS] [--cursor C]
  redpoint reconcile --against-db (--all | --user U...) [--repair] [--rate N] [--grace MS] [--cursor C]
            (durable tier: Redis against PostgreSQL, record by record)
  redpoint import FILE.jsonl [--dry-run] [--from-counters [--legacy-url URL] [--counters 'unread:*'] [--totals 'total_unread:*']]
  redpoint inspect user U | inspect conv C
  redpoint erase user U [--no-scan]
  redpoint delete conv C
  redpoint head C MAXSEQ
  redpoint restore [--rate N]   (durable tier: warm every user from PostgreSQL into Redis)
  redpoint reset-read U C [SEQ]   (lower U's read position in C to SEQ, default C's head)
  redpoint rebase C SEQ   (lower C's head that went wrong to SEQ, with every member's state)

The store: REDIS_URL or REDIS_CLUSTER_NODES (and the server's other variables), as for the
server; or --url http://host:port of a running server (REDPOINT_API_KEY), which a memory engine
needs. Common options: --json (machine-readable output), --no-progress.
Exit codes: 0 done, 1 something is left wrong (findings, bad lines, not found), 2 usage, 3 failure.`;

const OPTIONS = {
  url: { type: 'string' },
  json: { type: 'boolean', default: false },
  'no-progress': { type: 'boolean', default: false },
  all: { type: 'boolean', default: false },
  user: { type: 'string', multiple: true },
  conv: { type: 'string', multiple: true },
  repair: { type: 'boolean', default: false },
  'against-db': { type: 'boolean', default: false },
  rate: { type: 'string', default: '500' },
  grace: { type: 'string', default: '1000' },
  cursor: { type: 'string', default: '' },
  'dry-run': { type: 'boolean', default: false },
  'from-counters': { type: 'boolean', default: false },
  'legacy-url': { type: 'string' },
  counters: { type: 'string', default: 'unread:*' },
  totals: { type: 'string', default: 'total_unread:*' },
  batch: { type: 'string', default: '2000' },
  parallel: { type: 'string', default: '4' },
  'no-scan': { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

function positiveInt(name: string, text: string, min = 1): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`--${name} wants an integer >= ${min}, got ${text}`);
  return n;
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined && !values.help ? 2 : 0;
  }
  const out = (text: string): void => void process.stdout.write(text);
  const users = values.user ?? [];
  const convs = values.conv ?? [];
  const progress = !values['no-progress'] && !values.json;
  const exact = (n: number): void => {
    if (rest.length !== n) throw new UsageError(`${command} takes ${n} argument(s)\n\n${USAGE}`);
  };
  // Check the arguments before connecting.
  let run: (toolbox: Awaited<ReturnType<typeof connect>>['toolbox']) => Promise<number>;
  switch (command) {
    case 'reconcile': {
      exact(0);
      if (!values.all && users.length === 0 && convs.length === 0) throw new UsageError('reconcile needs --all, --user U or --conv C');
      const args = {
        users,
        convs,
        all: values.all,
        repair: values.repair,
        rate: positiveInt('rate', values.rate),
        graceMs: positiveInt('grace', values.grace, 0),
        cursor: values.cursor,
        json: values.json,
        progress,
      };
      let interrupted = false;
      process.once('SIGINT', () => (interrupted = true));
      if (values['against-db']) {
        if (values.url !== undefined)
          throw new UsageError('reconcile --against-db reaches Redis and PostgreSQL directly (REDIS_URL, DATABASE_URL), not through --url');
        if (convs.length > 0) throw new UsageError('reconcile --against-db takes --all or --user U (conversations are checked by --all)');
        return dbReconcileCommand(args, out, () => interrupted);
      }
      run = (toolbox) => reconcileCommand(toolbox, args, out, () => interrupted);
      break;
    }
    case 'import': {
      exact(1);
      const file = rest[0] ?? '';
      const legacyUrl = values['legacy-url'] ?? process.env.REDIS_URL;
      if (values['from-counters'] && legacyUrl === undefined) throw new UsageError('--from-counters needs --legacy-url (or REDIS_URL)');
      const args = {
        file,
        dryRun: values['dry-run'],
        legacy: values['from-counters'] && legacyUrl !== undefined ? { url: legacyUrl, counters: values.counters, totals: values.totals } : undefined,
        batchPairs: positiveInt('batch', values.batch),
        parallel: positiveInt('parallel', values.parallel),
        json: values.json,
        progress,
      };
      run = (toolbox) => importCommand(toolbox, args, out);
      break;
    }
    case 'inspect': {
      exact(2);
      const [what = '', id = ''] = rest;
      if (what !== 'user' && what !== 'conv') throw new UsageError('inspect user U | inspect conv C');
      run = (toolbox) => inspectCommand(toolbox, what, id, values.json, out);
      break;
    }
    case 'erase': {
      exact(2);
      if (rest[0] !== 'user') throw new UsageError('erase user U');
      const uid = rest[1] ?? '';
      run = (toolbox) => eraseCommand(toolbox, uid, !values['no-scan'], out);
      break;
    }
    case 'delete': {
      exact(2);
      if (rest[0] !== 'conv') throw new UsageError('delete conv C');
      const conv = rest[1] ?? '';
      run = (toolbox) => deleteCommand(toolbox, conv, out);
      break;
    }
    case 'head': {
      exact(2);
      const conv = rest[0] ?? '';
      const maxSeq = positiveInt('MAXSEQ', rest[1] ?? '');
      run = (toolbox) => headCommand(toolbox, conv, maxSeq, out);
      break;
    }
    case 'restore': {
      exact(0);
      if (values.url !== undefined) throw new UsageError('restore reaches Redis and PostgreSQL directly (REDIS_URL, DATABASE_URL), not through --url');
      let interrupted = false;
      process.once('SIGINT', () => (interrupted = true));
      return restoreCommand({ rate: positiveInt('rate', values.rate), json: values.json, progress }, out, () => interrupted);
    }
    case 'reset-read': {
      if (rest.length !== 2 && rest.length !== 3) throw new UsageError(`reset-read takes U C [SEQ]\n\n${USAGE}`);
      const [uid = '', conv = '', seqText] = rest;
      const seq = seqText === undefined ? undefined : positiveInt('SEQ', seqText, 0);
      run = (toolbox) => resetReadCommand(toolbox, uid, conv, seq, out);
      break;
    }
    case 'rebase': {
      exact(2);
      const conv = rest[0] ?? '';
      const seq = positiveInt('SEQ', rest[1] ?? '', 0);
      run = (toolbox) => rebaseCommand(toolbox, conv, seq, out);
      break;
    }
    default:
      throw new UsageError(`unknown command ${command}\n\n${USAGE}`);
  }
  const { toolbox } = await connect(values.url);
  try {
    return await run(toolbox);
  } finally {
    await toolbox.close();
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  const usage =
    err instanceof UsageError || err instanceof ConfigError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'));
  process.stderr.write(`redpoint: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = usage ? 2 : 3;
}
