import { afterEach, describe, expect, it } from 'vitest';
import { RetryLaterError, type UserBudgetOptions, UserBudgets } from '../../server/gateway/user-budget.js';

/** The budget's arithmetic on a clock the test moves: admission, debt, the heavy-request gate, refunds, the HTTP rate. */
const OPTIONS: UserBudgetOptions = { costPerSecond: 1000, costBurst: 5000, heavyCost: 500, httpRequestsPerSecond: 10 };
let clock = 0;
const budgets: UserBudgets[] = [];
function make(options: Partial<UserBudgetOptions> = {}): UserBudgets {
  clock = 0;
  const b = new UserBudgets({ ...OPTIONS, ...options }, () => clock);
  budgets.push(b);
  return b;
}
afterEach(() => {
  for (const b of budgets.splice(0)) b.close();
});

function refusal(fn: () => unknown): RetryLaterError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RetryLaterError) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('UserBudgets', () => {
  it('a heavy request of unknown cost runs alone; once known small, requests of that kind run side by side', () => {
    const b = make();
    const first = b.admit('u', 'delta');
    expect(refusal(() => b.admit('u', 'delta')).retryAfterMs).toBe(250);
    // Another user is not affected.
    b.settle(b.admit('v', 'delta'), 3);
    b.settle(first, 10);
    const a = b.admit('u', 'delta');
    const c = b.admit('u', 'delta');
    b.settle(a, 10);
    b.settle(c, 10);
  });

  it('a request over the budget leaves a debt: refused, with the time it takes to pay back, then admitted', () => {
    const b = make();
    b.settle(b.admit('u', 'snapshot'), 8000);
    // 5000 - 8000 = -3000 at 1000/s: 3 s.
    const e = refusal(() => b.admit('u', 'snapshot'));
    expect(e.code).toBe('rate_limited');
    expect(e.retryAfterMs).toBe(3000);
    clock += 2000;
    expect(refusal(() => b.admit('u', 'snapshot')).retryAfterMs).toBe(1000);
    clock += 1000;
    const t = b.admit('u', 'snapshot');
    // Charged its last cost up front: a concurrent pull of another kind already sees the debt.
    expect(refusal(() => b.admit('u', 'unread')).retryAfterMs).toBe(8000);
    b.settle(t, undefined);
    b.admit('u', 'unread');
  });

  it('a failed request is refunded; the budget never grows above its burst', () => {
    const b = make();
    b.settle(b.admit('u', 'snapshot'), 4000);
    b.settle(b.admit('u', 'snapshot'), undefined);
    clock += 60_000;
    b.settle(b.admit('u', 'snapshot'), 4000);
    b.settle(b.admit('u', 'snapshot'), 4000);
    expect(refusal(() => b.admit('u', 'snapshot')).retryAfterMs).toBe(3000);
  });

  it('client HTTP requests: burst 3x the rate, then refused with a hint, refilled with time', () => {
    const b = make();
    for (let i = 0; i < 30; i++) b.request('u');
    const e = refusal(() => b.request('u'));
    expect(e.retryAfterMs).toBe(100);
    clock += 100;
    b.request('u');
    expect(() => b.request('u')).toThrow(RetryLaterError);
  });
});
