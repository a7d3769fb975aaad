import { describe, expect, it } from 'vitest';
import { ConfigError, describeConfig, loadConfig } from '../../server/config.js';

/** The badge hook's variables (server/config.ts, docs/badge-hook.md "Turning it on"). */
describe('BADGE_HOOK_* configuration', () => {
  const secret = 'hook-config-secret-0123456789abcdef0123';

  it('is off unless a webhook or a NATS URL is set', () => {
    expect(loadConfig({}).badgeHook).toBeUndefined();
    expect(loadConfig({ BADGE_HOOK_INTERVAL_MS: '500' }).badgeHook).toBeUndefined();
  });

  it('takes a webhook with its secret, the defaults, and masks the secret in the start-up log', () => {
    const config = loadConfig({ BADGE_HOOK_URL: 'https://push.example/badge', BADGE_HOOK_SECRET: secret });
    expect(config.badgeHook).toEqual({
      webhook: { url: 'https://push.example/badge', secret, timeoutMs: 5_000 },
      nats: undefined,
      intervalMs: 1_000,
      attempts: 6,
      retryMs: 250,
      parkMs: 60_000,
      concurrency: 32,
      socketlessOnly: false,
    });
    const described = JSON.stringify(describeConfig(config));
    expect(described).not.toContain(secret);
    expect(described).toContain('https://push.example/badge');
  });

  it('takes NATS alone, with its subject', () => {
    const config = loadConfig({ BADGE_HOOK_NATS_URL: 'nats://127.0.0.1:4222', BADGE_HOOK_NATS_SUBJECT: 'app.badges', BADGE_HOOK_INTERVAL_MS: '250' });
    expect(config.badgeHook).toMatchObject({ webhook: undefined, nats: { url: 'nats://127.0.0.1:4222', subject: 'app.badges' }, intervalMs: 250 });
  });

  it('refuses a webhook without its secret, a short secret, and bad values, naming the variable', () => {
    expect(() => loadConfig({ BADGE_HOOK_URL: 'https://push.example/badge' })).toThrow(/BADGE_HOOK_SECRET/);
    expect(() => loadConfig({ BADGE_HOOK_URL: 'https://push.example/badge', BADGE_HOOK_SECRET: 'short' })).toThrow(ConfigError);
    expect(() => loadConfig({ BADGE_HOOK_URL: 'ftp://push.example/badge', BADGE_HOOK_SECRET: secret })).toThrow(/BADGE_HOOK_URL/);
    expect(() => loadConfig({ BADGE_HOOK_NATS_URL: 'nats://x:4222', BADGE_HOOK_INTERVAL_MS: '0' })).toThrow(/BADGE_HOOK_INTERVAL_MS/);
    expect(() => loadConfig({ BADGE_HOOK_NATS_URL: 'nats://x:4222', BADGE_HOOK_NATS_SUBJECT: 'a..b' })).toThrow(/BADGE_HOOK_NATS_SUBJECT/);
  });
});
