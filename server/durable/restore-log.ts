import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';

/** A burst ends once no restore came for this long... */
const QUIET_MS = 1_000;
/** ...or this long after it began, so a restore that goes on for minutes is still reported as it goes. */
const LONGEST_MS = 30_000;

export interface RestoreLogOptions {
  /** Where the restores come from, for the line: `PostgreSQL at host:port/db`. */
  source: string;
  quietMs?: number;
  longestMs?: number;
}

/**
 * Restores on touch (a user or conversation Redis lacks, put back from PostgreSQL) come in bursts:
 * after Redis lost its data every first touch restores, after a cold sweep a returning user does.
 * One info line per burst says how many users and conversations came back and from where (one
 * line per restore would flood the log after a wipe; none left only `redpoint_restored_total` to
 * tell), and `redpoint_restore_bursts_total` counts the bursts. Each server (each worker of
 * WORKERS, each process) has its own: a burst they share is one line from each, for its restores.
 */
export class RestoreLog {
  private readonly bursts: Counter;
  private users = 0;
  private conversations = 0;
  private startedAt = 0;
  private lastAt = 0;
  private quiet: NodeJS.Timeout | undefined;
  private longest: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: Logger,
    registry: Registry,
    private readonly options: RestoreLogOptions,
  ) {
    this.bursts = new Counter({
      name: 'redpoint_restore_bursts_total',
      help: 'Bursts of restores on touch (users and conversations put back from PostgreSQL), each reported by one log line (event restored)',
      registers: [registry],
    });
  }

  /** `n` users or conversations were restored just now. */
  add(kind: 'user' | 'conversation', n: number): void {
    if (n <= 0) return;
    if (kind === 'user') this.users += n;
    else this.conversations += n;
    this.lastAt = Date.now();
    if (this.longest === undefined) {
      this.startedAt = Date.now();
      this.longest = setTimeout(() => this.flush(), this.options.longestMs ?? LONGEST_MS);
      this.longest.unref();
    }
    clearTimeout(this.quiet);
    this.quiet = setTimeout(() => this.flush(), this.options.quietMs ?? QUIET_MS);
    this.quiet.unref();
  }

  /** Reports the burst in progress, if any (a server closing reports its last one). */
  flush(): void {
    clearTimeout(this.quiet);
    clearTimeout(this.longest);
    this.quiet = undefined;
    this.longest = undefined;
    const { users, conversations } = this;
    if (users === 0 && conversations === 0) return;
    this.users = 0;
    this.conversations = 0;
    // From the burst's first restore to its last: how long Redis was being filled again.
    const ms = this.lastAt - this.startedAt;
    this.bursts.inc();
    this.log.info(
      { event: 'restored', users, conversations, source: this.options.source, ms },
      `restored ${users} user${users === 1 ? '' : 's'} and ${conversations} conversation${conversations === 1 ? '' : 's'} from ${this.options.source} over ${ms} ms (Redis lacked them: it lost data, or the cold sweep evicted them)`,
    );
  }
}
