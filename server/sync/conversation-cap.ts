import { RedpointError } from '../../protocol/errors.js';
import type { Engine } from '../engine/engine.js';

/** Users named in one refusal's message; the rest are counted. */
const NAMED_IN_MESSAGE = 10;

/**
 * MAX_CONVERSATIONS_PER_USER: a membership call that would make a user a member of more
 * conversations than the cap is refused with 422 `conversation_limit`.
 *
 * The count is not kept in an atomic step with the join (that would be the engine's user step),
 * so the check is made twice. Before the change: a user already at the cap who is not yet a
 * member refuses the call, nothing applied. After it: two calls racing past the first check may
 * both have joined the same user; each one that now sees the user over the cap withdraws its own
 * new join (a membership change removing the user again) and is refused. Whichever call's
 * second check comes last sees every join that the others kept, so once the calls have answered
 * no user is over the cap (some racing calls may be refused that one at a time would have been
 * accepted). A process that dies between its join and its withdrawal leaves the user over the
 * cap by that join until the user leaves a conversation.
 */
export class ConversationCap {
  constructor(
    private readonly engine: Engine,
    readonly max: number,
  ) {}

  /** The uids of `add` that would be new members of `conv`; throws when one is already at the cap. */
  async before(conv: string, add: readonly string[]): Promise<string[]> {
    const found = await this.engine.memberships([...new Set(add)], conv);
    const joining = found.filter((m) => !m.member);
    const full = joining.filter((m) => m.conversations >= this.max).map((m) => m.uid);
    if (full.length > 0) throw this.refusal(full, 'nothing was applied');
    return joining.map((m) => m.uid);
  }

  /** Of the users that joined, those now over the cap (their joins must be withdrawn). */
  async over(conv: string, joined: readonly string[]): Promise<string[]> {
    if (joined.length === 0) return [];
    const found = await this.engine.memberships(joined, conv);
    return found.filter((m) => m.member && m.conversations > this.max).map((m) => m.uid);
  }

  refusal(uids: readonly string[], what: string): RedpointError {
    const named = uids.slice(0, NAMED_IN_MESSAGE).join(', ');
    const more = uids.length > NAMED_IN_MESSAGE ? ` and ${uids.length - NAMED_IN_MESSAGE} more` : '';
    return new RedpointError(
      'conversation_limit',
      `${uids.length === 1 ? 'user' : 'users'} ${named}${more} would be in more than ${this.max} conversations (MAX_CONVERSATIONS_PER_USER); ${what}`,
    );
  }
}
