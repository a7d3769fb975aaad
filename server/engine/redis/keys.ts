/**
 * Key layout. Every per-user key shares the `{u:<uid>}` hash tag and every per-conversation key
 * the `{c:<conv>}` tag, so each Lua script touches one Redis Cluster slot. Ids match
 * `ID_PATTERN` (no braces), so an id can never break out of its tag.
 */
export interface UserKeys {
  meta: string;
  convs: string;
  totals: string;
  stream: string;
  snaps: string;
  large: string;
}

export interface ConvKeys {
  meta: string;
  members: string;
}

export function userKeys(prefix: string, uid: string): UserKeys {
  const tag = `${prefix}:{u:${uid}}`;
  return {
    meta: `${tag}:meta`,
    convs: `${tag}:c`,
    totals: `${tag}:tot`,
    stream: `${tag}:s`,
    snaps: `${tag}:snaps`,
    large: `${tag}:large`,
  };
}

export function convKeys(prefix: string, conv: string): ConvKeys {
  const tag = `${prefix}:{c:${conv}}`;
  return { meta: `${tag}:meta`, members: `${tag}:mem` };
}
