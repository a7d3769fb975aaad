import { describe, expect, it } from 'vitest';
import { expectWithin } from './bound.js';

describe('expectWithin', () => {
  it('holds a short claim to a slack in proportion: 3 s more than a 50 ms claim fails (a flat 3 s slack let it pass)', () => {
    expect(() => expectWithin('a 50 ms claim', 3_049, 50)).toThrow('claim 50 ms');
    expectWithin('a 50 ms claim', 60, 50);
  });

  it('gives a longer claim more: half of it again plus a quarter second', () => {
    expectWithin('a 2 s claim', 2_900, 2_000);
    expect(() => expectWithin('a 2 s claim', 4_900, 2_000)).toThrow('claim 2000 ms');
  });
});
