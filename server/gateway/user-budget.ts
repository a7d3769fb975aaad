import { RedpointError } from '../../protocol/errors.js';

/**
 * What a user may cost this process. Limits on frames and requests count calls, not their work:
 * a user in 5,000 conversations pulling snapshots from ten sockets stays under every call limit
 * while the process spends its time encoding megabytes for them, and every other user waits.
 * So each costly request (a pull, the hello's sync, `/unread`, `/v1/sync`) is charged what it
 * carried: one unit per conversation state (snapshot conversations, entries, heads, listed
 * conversations) plus one for the request.
 */
export interface UserBudgetOptions {
  /** Units a user earns back per second. */
  costPerSecond: number;
  /** The most a user can spend at once (and the level a new or idle user starts at). */
  costBurst: number;
  /**
   * A request whose kind last cost at least this (or whose cost is not known yet) is heavy: one
   * user's heavy requests are answered one at a time (across sockets and HTTP), so that two of
   * them never run back to back in one turn of the event loop while everyone else waits.
   */
  heavyCost: number;
  /** Client (user token) HTTP requests per second per user; burst 3x. */
  httpRequestsPerSecond: number;
}

export const defaultUserBudgetOptions: UserBudgetOptions = {
  costPerSecond: 5_000,
  costBurst: 25_000,
  heavyCost: 1_000,
  httpRequestsPerSecond: 20,
};

/** Refused for cost or rate: `rate_limited`, with when to try again (HTTP `Retry-After`, WS `retryAfterMs`). */
export class RetryLaterError extends RedpointError {
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super('rate_limited', message);
  }
}

interface UserAccount {
  /** Units available; negative is debt, paid back at costPerSecond. */
  level: number;
  last: number;
  /** Heavy requests in flight (at most one). */
  heavyInFlight: number;
  /** What this user's last costly request of each kind cost: charged up front on the next one. */
  readonly estimates: Map<string, number>;
  /** Client HTTP requests: a token bucket. */
  requests: number;
}

/** A costly request let through: settle it with what it cost once that is known (or 0 if it failed). */
export interface Ticket {
  readonly uid: string;
  readonly kind: string;
  readonly charged: number;
  readonly heavy: boolean;
}

/** The retry hint while another heavy request of the user is in flight: about one snapshot's time. */
const HEAVY_RETRY_MS = 250;

/** An account idle this long with nothing owed is forgotten (the map stays the size of the active users). */
const FORGET_AFTER_MS = 60_000;

/**
 * The budgets of the users this process serves, shared by their sockets and their HTTP requests.
 * Per process on purpose: what it protects is this process's event loop, which a user's work on
 * other processes does not slow down.
 *
 * A costly request is admitted while the user owes nothing (and, if heavy, has no other heavy
 * request in flight); it is charged its kind's last cost at once (so that concurrent requests of
 * a heavy user see the debt before any of them finishes) and the difference once its real cost
 * is known. A refusal says how long to wait: until the debt is paid back, or a moment for the
 * heavy request in flight.
 */
export class UserBudgets {
  private readonly accounts = new Map<string, UserAccount>();
  private readonly sweep: NodeJS.Timeout;

  constructor(
    readonly options: UserBudgetOptions,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.sweep = setInterval(() => this.forgetIdle(), FORGET_AFTER_MS);
    this.sweep.unref();
  }

  /** Throws RetryLaterError when `uid` may not start a costly request of `kind` now. */
  admit(uid: string, kind: string): Ticket {
    const account = this.account(uid);
    const { costPerSecond, heavyCost } = this.options;
    if (account.level < 0) {
      throw new RetryLaterError(
        `over this user's cost budget; retry in ${Math.ceil(-account.level / costPerSecond)} s`,
        Math.ceil((-account.level / costPerSecond) * 1000),
      );
    }
    const estimate = account.estimates.get(kind);
    const heavy = estimate === undefined || estimate >= heavyCost;
    if (heavy && account.heavyInFlight > 0) {
      throw new RetryLaterError('another large request of this user is being answered; retry in a moment', HEAVY_RETRY_MS);
    }
    const charged = estimate ?? 1;
    account.level -= charged;
    if (heavy) account.heavyInFlight += 1;
    return { uid, kind, charged, heavy };
  }

  /** The request is done: `cost` is what it carried (0 when it failed before sending anything). */
  settle(ticket: Ticket, cost: number | undefined): void {
    const account = this.account(ticket.uid);
    if (ticket.heavy) account.heavyInFlight = Math.max(0, account.heavyInFlight - 1);
    if (cost === undefined) {
      account.level += ticket.charged;
      return;
    }
    account.level -= cost - ticket.charged;
    account.estimates.set(ticket.kind, cost);
  }

  /** One client HTTP request of `uid`; throws RetryLaterError over `httpRequestsPerSecond` (burst 3x). */
  request(uid: string): void {
    const account = this.account(uid);
    if (account.requests >= 1) {
      account.requests -= 1;
      return;
    }
    const perSecond = this.options.httpRequestsPerSecond;
    throw new RetryLaterError(`more than ${perSecond} requests per second for this user`, Math.ceil(((1 - account.requests) / perSecond) * 1000));
  }

  /** Accounts held (for tests and metrics). */
  get size(): number {
    return this.accounts.size;
  }

  close(): void {
    clearInterval(this.sweep);
  }

  private account(uid: string): UserAccount {
    const now = this.now();
    const { costPerSecond, costBurst, httpRequestsPerSecond } = this.options;
    let account = this.accounts.get(uid);
    if (!account) {
      account = { level: costBurst, last: now, heavyInFlight: 0, estimates: new Map(), requests: httpRequestsPerSecond * 3 };
      this.accounts.set(uid, account);
      return account;
    }
    const seconds = (now - account.last) / 1000;
    account.last = now;
    account.level = Math.min(costBurst, account.level + seconds * costPerSecond);
    account.requests = Math.min(httpRequestsPerSecond * 3, account.requests + seconds * httpRequestsPerSecond);
    return account;
  }

  private forgetIdle(): void {
    const now = this.now();
    for (const [uid, account] of this.accounts) {
      const refilled = account.level + ((now - account.last) / 1000) * this.options.costPerSecond;
      if (account.heavyInFlight === 0 && now - account.last > FORGET_AFTER_MS && refilled >= this.options.costBurst) this.accounts.delete(uid);
    }
  }
}

/** What a pull reply costs: one unit per conversation state it carries, plus one. */
export function pullCost(reply: {
  snapshot?: { convs: readonly unknown[] } | undefined;
  entries: readonly unknown[];
  heads: Readonly<Record<string, number>>;
}): number {
  return 1 + (reply.snapshot?.convs.length ?? 0) + reply.entries.length + Object.keys(reply.heads).length;
}
