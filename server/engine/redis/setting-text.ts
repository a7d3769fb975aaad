/**
 * A user setting's text in Redis (keys.ts sharingKey, mutedMentionsKey). Without the durable tier
 * it is '1' or '0' (or no key: the default). With it, `<rev>:<1|0>`: the revision of the user's
 * settings row in PostgreSQL that the value came from (StoredSetting.rev), so that of two
 * processes writing at once, the one whose PostgreSQL write came last has the last word in
 * Redis too (setting_set.lua takes only a newer revision; it reads the revision with the pattern
 * SETTING_REV_LUA, the one place Lua knows this layout). A text without a revision is revision 0.
 */
export function settingText(on: boolean, rev?: number): string {
  const value = on ? '1' : '0';
  return rev === undefined ? value : `${rev}:${value}`;
}

/** The value a setting's text holds; undefined for no key (''). */
export function settingValue(raw: string): boolean | undefined {
  if (raw === '') return undefined;
  return raw.slice(raw.indexOf(':') + 1) === '1';
}

/** The Lua pattern of the revision in a setting's text (settingText), rendered into setting_set.lua's prelude. */
export const SETTING_REV_LUA = '^(%d+):';
