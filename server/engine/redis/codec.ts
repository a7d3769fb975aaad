/** Script replies as ioredis returns them, and their checked reading. The stored texts they carry: ../state-text.ts. */

/** A script reply as ioredis returns it from the string variant of a command. */
export type Reply = string | number | null | Reply[];

export function asString(r: Reply | undefined): string {
  if (typeof r === 'string') return r;
  throw new Error(`unexpected script reply: expected a string, got ${typeof r}`);
}

export function asNumber(r: Reply | undefined): number {
  if (typeof r === 'number') return r;
  if (typeof r === 'string' && r !== '' && Number.isSafeInteger(Number(r))) return Number(r);
  throw new Error(`unexpected script reply: expected an integer, got ${typeof r}`);
}

export function asArray(r: Reply | undefined): Reply[] {
  if (Array.isArray(r)) return r;
  throw new Error(`unexpected script reply: expected an array, got ${typeof r}`);
}

export function asStrings(r: Reply | undefined): string[] {
  return asArray(r).map(asString);
}
