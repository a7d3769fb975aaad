/** A small seeded PRNG (mulberry32): values in [0, 1), so a failing randomized run can be replayed exactly from its seed. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A PRNG seeded by `seed` and a text (FNV-1a of it): the same text always gets the same stream,
 * whenever it is asked for. For decisions about events that arrive in an order the test does not
 * control (a frame's fate decided by the frame, not by how many frames came before it).
 */
export function keyedRandom(seed: number, key: string): () => number {
  let h = 0x811c9dc5 ^ (seed >>> 0);
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return mulberry32(h >>> 0);
}
