import { RedpointError } from '../../protocol/errors.js';
import type { Engine } from '../engine/engine.js';

/**
 * The two ways a user's request can miss a conversation, each naming its fix: a conversation
 * that does not exist is created by the message service's first membership call; an existing one
 * the user is not in needs the user added. Both fixes are the same endpoint (API key only).
 */
export function unknownConversation(convs: readonly string[]): RedpointError {
  if (convs.length === 1) {
    return new RedpointError(
      'unknown_conversation',
      `unknown conversation: ${convs[0]}; create it by adding its members (PUT /v1/conversations/${convs[0]}/members, with the API key)`,
    );
  }
  return new RedpointError(
    'unknown_conversation',
    `unknown conversations: ${convs.join(', ')}; create each by adding its members (PUT /v1/conversations/{conv}/members, with the API key)`,
  );
}

function notAMember(uid: string, conv: string): RedpointError {
  return new RedpointError(
    'not_a_member',
    `${uid} is not a member of ${conv}; the message service adds members with PUT /v1/conversations/${conv}/members {"add":["${uid}"]}`,
  );
}

/**
 * Which of `convs` (where `uid`'s ops found no membership) do not exist and which the user is
 * just not in: one store call, made only once something was refused. A conversation created or
 * deleted between the op and this call is reported as it is now, which was true at some moment.
 */
export async function refusals(engine: Engine, convs: readonly string[]): Promise<Array<{ conv: string; code: 'unknown_conversation' | 'not_a_member' }>> {
  if (convs.length === 0) return [];
  const missing = new Set(await engine.missingConversations(convs));
  return convs.map((conv) => ({ conv, code: missing.has(conv) ? 'unknown_conversation' : 'not_a_member' }));
}

/** The error for `uid`'s op on `conv` that found no membership: refusals() for one conversation. */
export async function refusal(engine: Engine, uid: string, conv: string): Promise<RedpointError> {
  const [found] = await refusals(engine, [conv]);
  return found?.code === 'not_a_member' ? notAMember(uid, conv) : unknownConversation([conv]);
}
