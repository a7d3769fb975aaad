/** CORS_ORIGINS, parsed beside the rest of the configuration (config.ts); gateway/cors.ts applies it. */

/** `*`, or exact origins (`scheme://host[:port]`). */
export type CorsOrigins = '*' | readonly string[];

/** Parses CORS_ORIGINS; throws naming the entry that is not an exact origin. */
export function parseCorsOrigins(text: string): CorsOrigins {
  const entries = text.split(',').map((entry) => entry.trim());
  if (entries.includes('*')) {
    if (entries.length > 1) throw new Error('`*` allows every origin: give it alone, or list exact origins');
    return '*';
  }
  for (const entry of entries) {
    let origin: string;
    try {
      origin = new URL(entry).origin;
    } catch {
      throw new Error(`${JSON.stringify(entry)} is not an origin (scheme://host[:port])`);
    }
    // Browsers send the serialized origin: lower-case, no default port, no path or slash.
    if (origin !== entry) throw new Error(`${JSON.stringify(entry)} is not an exact origin${origin === 'null' ? '' : `; write ${origin}`}`);
  }
  return entries;
}
