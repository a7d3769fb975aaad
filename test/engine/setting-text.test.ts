import { describe, expect, it } from 'vitest';
import { SETTING_REV_LUA, settingText, settingValue } from '../../server/engine/redis/setting-text.js';

/**
 * A user setting's text in Redis (server/engine/redis/setting-text.ts). setting_set.lua reads the
 * revision with SETTING_REV_LUA; that both sides agree on texts this module writes is shown against
 * a real Redis by test/durable/user-settings.test.ts.
 */
describe('setting-text', () => {
  it('reads back what it writes, with a revision (durable tier) and without', () => {
    for (const on of [true, false]) {
      expect(settingValue(settingText(on))).toBe(on);
      expect(settingValue(settingText(on, 0))).toBe(on);
      expect(settingValue(settingText(on, 9_007_199_254_740_991))).toBe(on);
    }
    expect(settingText(true, 12)).toBe('12:1');
    expect(settingText(false)).toBe('0');
  });

  it('no key is no value; a text written before revisions is its bare value', () => {
    expect(settingValue('')).toBeUndefined();
    expect(settingValue('1')).toBe(true);
    expect(settingValue('0')).toBe(false);
  });

  it('the Lua pattern takes the revision from a text with one, and nothing from a bare value', () => {
    // A Lua pattern of this shape ('^(%d+):') is the regular expression with %d for \d.
    const asRegExp = new RegExp(SETTING_REV_LUA.replace('%d', '\\d'));
    expect(settingText(true, 42).match(asRegExp)?.[1]).toBe('42');
    expect(settingText(false).match(asRegExp)).toBeNull();
  });
});
