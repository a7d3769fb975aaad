import { describe, expect, it } from 'vitest';
import type { ClaimTerms, Engine } from '../../server/engine/engine.js';
import type { UseEngine } from './conformance.js';
import { join, leave, message, one } from './conformance-helpers.js';

const TERMS: ClaimTerms = { cap: 2, holdMs: 60_000 };

async function outcomes(e: Engine, conv: string, uids: string[], terms: ClaimTerms = TERMS): Promise<string[]> {
  return (await e.claimJoins(conv, uids, terms)).map((c) => `${c.uid}:${c.outcome}:${c.held}`);
}

/**
 * The conversation cap's claims (Engine.claimJoins, rules.ts claimOutcome): decided on the user,
 * counting its memberships and the claims of its other joins in flight, so that concurrent joins
 * of one user are admitted exactly up to the cap on every engine.
 */
export function claimConformance(use: UseEngine): void {
  describe('join claims (the conversation cap)', () => {
    it('claims up to the cap, counting members and claims in flight; a member is never refused', async () => {
      const e = await use();
      await one(e, join('u', 'c1'));
      expect(await outcomes(e, 'c1', ['u'])).toEqual(['u:member:1']);
      expect(await outcomes(e, 'c2', ['u', 'fresh'])).toEqual(['u:claimed:1', 'fresh:claimed:0']);
      // The claim of c2 holds u's second place: c3 is refused, c2 again keeps its claim.
      expect(await outcomes(e, 'c3', ['u'])).toEqual(['u:full:2']);
      expect(await outcomes(e, 'c2', ['u'])).toEqual(['u:claimed:1']);
      // Its join lands: the claim is spent, the member count has it.
      await one(e, join('u', 'c2'));
      expect(await outcomes(e, 'c2', ['u'])).toEqual(['u:member:2']);
      expect(await outcomes(e, 'c3', ['u'])).toEqual(['u:full:2']);
      // A pending record (a message before the join landed) is not a membership.
      await one(e, message('v', 'c1', 5));
      expect(await outcomes(e, 'c1', ['v'])).toEqual(['v:claimed:0']);
      // A leave makes room.
      await one(e, leave('u', 'c1'));
      expect(await outcomes(e, 'c3', ['u'])).toEqual(['u:claimed:1']);
      expect(await outcomes(e, 'c4', ['u'])).toEqual(['u:full:2']);
    });

    it('a claim is spent by the membership op that lands after it, whatever comes next', async () => {
      const e = await use();
      await one(e, join('u', 'c1'));
      // Claimed, joined, left again before any other claim looked: the claim is spent all the same.
      expect(await outcomes(e, 'c2', ['u'])).toEqual(['u:claimed:1']);
      await one(e, join('u', 'c2'));
      await one(e, leave('u', 'c2'));
      expect(await outcomes(e, 'c3', ['u'])).toEqual(['u:claimed:1']);
      // A join that lost to a newer leave (the op arrived late): the leave spent the claim.
      await one(e, join('u', 'c3'));
      expect(await outcomes(e, 'c4', ['u'])).toEqual(['u:full:2']);
      const late = join('u', 'c4');
      await one(e, leave('u', 'c3'));
      expect(await outcomes(e, 'c4', ['u'])).toEqual(['u:claimed:1']);
      await one(e, leave('u', 'c4'));
      await one(e, late);
      expect(await outcomes(e, 'c5', ['u'])).toEqual(['u:claimed:1']);
    });

    it('concurrent claims of one user are decided one after another: exactly the room left', async () => {
      const e = await use();
      const convs = Array.from({ length: 12 }, (_, i) => `r${i}`);
      const claims = await Promise.all(convs.map((conv) => e.claimJoins(conv, ['u'], { cap: 5, holdMs: 60_000 })));
      expect(claims.flat().filter((c) => c.outcome === 'claimed').length).toBe(5);
      for (const c of claims.flat()) if (c.outcome === 'full') expect(c.held).toBe(5);
    });

    it("within a prefix (a thread follow's cap): only the conversations and claims under it count", async () => {
      const e = await use();
      const within = { cap: 2, holdMs: 60_000, within: 'g#r:' };
      // Other conversations, and another conversation's threads, are not counted.
      await one(e, join('u', 'g'));
      await one(e, join('u', 'h#r:1'));
      expect(await outcomes(e, 'other', ['u'], { cap: 5, holdMs: 60_000 })).toEqual(['u:claimed:2']);
      expect(await outcomes(e, 'g#r:1', ['u'], within)).toEqual(['u:claimed:0']);
      await one(e, join('u', 'g#r:1'));
      expect(await outcomes(e, 'g#r:1', ['u'], within)).toEqual(['u:member:1']);
      expect(await outcomes(e, 'g#r:2', ['u'], within)).toEqual(['u:claimed:1']);
      expect(await outcomes(e, 'g#r:3', ['u'], within)).toEqual(['u:full:2']);
      // A prefix with glob characters matches itself only (Redis reads the records by pattern).
      const globby = { cap: 1, holdMs: 60_000, within: 'a*[b]?\\#r:' };
      // Unescaped, the pattern a*[b]?\\#r:* would match this record.
      await one(e, join('u', 'aQbX#r:1'));
      expect(await outcomes(e, 'a*[b]?\\#r:1', ['u'], globby)).toEqual(['u:claimed:0']);
      // Concurrent claims under one prefix: exactly the room left.
      const racing = await Promise.all(Array.from({ length: 8 }, (_, i) => e.claimJoins(`k#r:${i + 1}`, ['u'], { cap: 3, holdMs: 60_000, within: 'k#r:' })));
      expect(racing.flat().filter((c) => c.outcome === 'claimed').length).toBe(3);
    });

    it('a claim whose join never lands lapses after its hold', async () => {
      const e = await use();
      // The hold is long next to the two calls before it (a loaded machine), the wait just past it.
      const brief = { cap: 1, holdMs: 1_500 };
      expect(await outcomes(e, 'lost', ['u'], brief)).toEqual(['u:claimed:0']);
      expect(await outcomes(e, 'next', ['u'], brief)).toEqual(['u:full:1']);
      await new Promise((resolve) => setTimeout(resolve, 1_600));
      expect(await outcomes(e, 'next', ['u'], brief)).toEqual(['u:claimed:0']);
    });
  });
}
