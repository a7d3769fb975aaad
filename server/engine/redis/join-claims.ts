import type { JoinClaim } from '../engine.js';
import { CLAIM_OUTCOMES, type ClaimOutcome } from '../rules.js';
import { asArray, asNumber, asString, type Reply } from './codec.js';

/** user_claim.lua's reply for `uid`, checked against rules.ts CLAIM_OUTCOMES (the Lua twin of claimOutcome names them). */
export function joinClaimOf(uid: string, reply: Reply): JoinClaim {
  const [outcome, held] = asArray(reply);
  const text = asString(outcome);
  if (!(CLAIM_OUTCOMES as readonly string[]).includes(text)) throw new Error(`user_claim.lua answered ${text} for ${uid}`);
  return { uid, outcome: text as ClaimOutcome, held: asNumber(held) };
}
