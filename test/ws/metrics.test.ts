import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

/** Reads one sample of the Prometheus text exposition (0 when absent). */
function sample(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

describe('/metrics', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ engine: 'redis' });
  });
  afterAll(async () => {
    await s?.close();
  });

  it('counts what happened: connections, frames, pushes with their latency, pulls, flushes, store calls', async () => {
    await s.members('m1', { add: ['alice', 'bob'] });
    const device = await s.client('alice');
    await s.post({ conv: 'm1', seq: 1, sender: 'bob' });
    await device.waitFrame((f) => f.t === 'change' && f.conv === 'm1' && f.state?.lastSeq === 1, { label: 'push of the message' });
    const text = await (await fetch(`${s.url}/metrics`)).text();

    expect(sample(text, 'redpoint_ws_connections')).toBe(1);
    expect(sample(text, 'redpoint_ws_frames_in_total', '{type="hello"}')).toBe(1);
    expect(sample(text, 'redpoint_ws_frames_out_total', '{type="change"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'redpoint_notify_latency_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'redpoint_pulls_total', '{kind="snapshot",transport="ws"}')).toBe(1);
    expect(sample(text, 'redpoint_group_commit_batch_messages_count')).toBe(1);
    // The Redis engine does a one-to-one flush in one call (Engine.recordAndApply).
    expect(sample(text, 'redpoint_store_op_seconds_count', '{op="record_and_apply"}')).toBe(1);
    expect(sample(text, 'redpoint_store_op_seconds_count', '{op="record_message"}')).toBe(0);
    expect(sample(text, 'redpoint_store_op_seconds_count', '{op="pull"}')).toBe(1);
    expect(sample(text, 'redpoint_http_requests_total', '{route="/v1/messages",status="200"}')).toBe(1);
    expect(sample(text, 'redpoint_ready')).toBe(1);
  });
});
