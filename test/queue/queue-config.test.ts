import { describe, expect, it } from 'vitest';
import { ConfigError, describeConfig, loadConfig } from '../../server/config.js';

describe('queue ingest settings', () => {
  it('defaults, values, and bad values named without echoing a URL', () => {
    expect(loadConfig({}).queue).toEqual({ outbox: undefined, nats: undefined, batch: 500, retrySeconds: 300 });
    expect(
      loadConfig({
        INGEST_OUTBOX_URL: 'postgres://rp:pw@db:5432/app',
        INGEST_OUTBOX_TABLE: 'msg.redpoint_outbox',
        INGEST_NATS_URL: 'nats://n1:4222',
        INGEST_NATS_STREAM: 'RP',
        INGEST_NATS_SUBJECT: 'rp.in',
        INGEST_BATCH: '100',
        INGEST_RETRY_SECONDS: '0',
      }).queue,
    ).toEqual({
      outbox: { url: 'postgres://rp:pw@db:5432/app', table: 'msg.redpoint_outbox' },
      nats: { url: 'nats://n1:4222', stream: 'RP', subject: 'rp.in' },
      batch: 100,
      retrySeconds: 0,
    });
    const bad = (): unknown =>
      loadConfig({ INGEST_OUTBOX_URL: 'mysql://u:secret@h/db', INGEST_OUTBOX_TABLE: 'Outbox; DROP TABLE x', INGEST_NATS_SUBJECT: 'a..b', INGEST_BATCH: '0' });
    expect(bad).toThrow(ConfigError);
    expect(bad).toThrow(/INGEST_OUTBOX_URL: .*\(value hidden\)[\s\S]*INGEST_OUTBOX_TABLE: [\s\S]*INGEST_NATS_SUBJECT: [\s\S]*INGEST_BATCH: /);
    expect(bad).not.toThrow(/secret/);
  });

  it('the startup line shows the sources without credentials', () => {
    const shown = JSON.stringify(
      describeConfig(loadConfig({ INGEST_OUTBOX_URL: 'postgres://rp:hunter2@db:5432/app', INGEST_NATS_URL: 'nats://u:pw2@n1:4222' })),
    );
    expect(shown).not.toContain('hunter2');
    expect(shown).not.toContain('pw2');
    expect(shown).toContain('"table":"redpoint_outbox"');
    expect(shown).toContain('"stream":"REDPOINT_INGEST"');
  });
});
