import { RedpointError } from '../../protocol/errors.js';
import type { Engine } from '../engine/engine.js';

/** Users named in one refusal's message; the rest are counted. */
const NAMED_IN_MESSAGE = 10;

/**
 * How long a claimed join counts against its user's cap without its membership landing: far
 * longer than a membership call takes (each of its store steps ends within STORE_TIMEOUT_MS),
 * short enough that a call which failed after its claims, and was not retried, holds a user's
 * place only for a while.
 */
const JOIN_HOLD_MS = 60_000;

export interface CapDecision {
  /** The users of the call that may join: current members, and joins claimed now. */
  admitted: string[];
  /** The users at the cap: they must not be added. */
  full: string[];
}

/**
 * MAX_CONVERSATIONS_PER_USER: a membership call may not make a user a member of more
 * conversations than the cap; such a user is left out and the call answers 422
 * `conversation_limit`.
 *
 * The user's count and the conversation's members live under different keys (on a Redis
 * Cluster, on different masters), so the decision is made on the user, before the conversation
 * step: each new join is claimed there, atomically with the user's member count and the claims
 * of the user's other joins in flight (Engine.claimJoins). Concurrent joins of one user, from
 * any process, are thus decided one after the other: exactly the room left is claimed, and a
 * refusal sees every join that will land. A refused user is never added, so nothing is withdrawn.
 */
export class ConversationCap {
  constructor(
    private readonly engine: Engine,
    readonly max: number,
    private readonly holdMs: number = JOIN_HOLD_MS,
  ) {}

  /** Claims the joins of `add` to `conv` on their users. */
  async claim(conv: string, add: readonly string[]): Promise<CapDecision> {
    const claims = await this.engine.claimJoins(conv, [...new Set(add)], { cap: this.max, holdMs: this.holdMs });
    const atCap = claims.filter((c) => c.outcome === 'full').map((c) => c.uid);
    const full = new Set(atCap.length > 0 ? await this.unlisted(conv, atCap) : []);
    return { admitted: add.filter((uid) => !full.has(uid)), full: [...full] };
  }

  /**
   * Of `uids` (at the cap on their own records), those `conv` does not list. One it lists is a
   * member there already: an earlier attempt of the call made the conversation step and died
   * before the user's step, and its claim has lapsed since. Re-adding a member is never refused,
   * and the retry finishes that join; refused, the user would stay on the roster without a record
   * while the 422 said it was not added. Read only when someone is at the cap.
   */
  private async unlisted(conv: string, uids: readonly string[]): Promise<string[]> {
    const roster = await this.engine.roster(conv);
    const listed = new Set(roster?.members.map((m) => m.uid));
    return uids.filter((uid) => !listed.has(uid));
  }

  refusal(uids: readonly string[], what: string): RedpointError {
    const named = uids.slice(0, NAMED_IN_MESSAGE).join(', ');
    const more = uids.length > NAMED_IN_MESSAGE ? ` and ${uids.length - NAMED_IN_MESSAGE} more` : '';
    return new RedpointError(
      'conversation_limit',
      `${uids.length === 1 ? 'user' : 'users'} ${named}${more} would be in more than ${this.max} conversations (MAX_CONVERSATIONS_PER_USER) and ${uids.length === 1 ? 'was' : 'were'} not added; ${what}`,
    );
  }
}
