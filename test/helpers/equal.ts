import { expect } from 'vitest';

/** `toEqual` as a predicate, for checks that accept one of several expected values. */
export function isEqual(a: unknown, b: unknown): boolean {
  try {
    expect(a).toEqual(b);
    return true;
  } catch {
    return false;
  }
}
