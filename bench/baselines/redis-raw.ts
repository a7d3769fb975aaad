/**
 * Baseline (b): raw Redis. The per-message state write done directly with ioredis — per member
 * HSET lastSeq + HINCRBY unread/badge (the INCR-counter design Redpoint replaces), per large group
 * one HSET of its head — in one pipeline, then the same delivery as Redpoint's Redis bus: publish
 * to the local uWS topics and PUBLISH on Redis for other processes (this process subscribes its
 * users' channels and drops its own echo, as Redpoint does). The cost of the store, nothing else.
 */
import { Redis } from 'ioredis';
import { pushFrame } from './membership.js';
import { portFromEnv, startRawServer, topicsFor } from './raw-core.js';

const url = process.env.REDIS_URL;
if (!url) throw new Error('REDIS_URL must be set');
const ORIGIN = `p${process.pid}|`;
const CHANNEL = 'raw:bus:';
const pub = new Redis(url, { enableAutoPipelining: true });
const sub = new Redis(url);
const subscribed = new Set<string>();
sub.on('message', (_channel: string, message: string) => {
  // Another process's push would be published to the local topic here; ours we already delivered.
  if (message.startsWith(ORIGIN)) return;
});

await startRawServer(portFromEnv(), (app, membership) => ({
  async deliver(messages) {
    const pipeline = pub.pipeline();
    for (const m of messages) {
      const c = membership.get(m.conv);
      if (!c) continue;
      if (c.large) {
        pipeline.hset(`raw:{c:${m.conv}}`, 'maxSeq', m.seq);
        continue;
      }
      for (const uid of c.members) {
        pipeline.hset(`raw:{u:${uid}}:last`, m.conv, m.seq);
        if (uid === m.sender) {
          pipeline.hset(`raw:{u:${uid}}:read`, m.conv, m.seq);
        } else {
          pipeline.hincrby(`raw:{u:${uid}}:unread`, m.conv, 1);
          pipeline.hincrby(`raw:{u:${uid}}:badge`, 'total', 1);
        }
      }
    }
    await pipeline.exec();
    for (const m of messages) {
      const frame = pushFrame(m.conv, m.seq);
      for (const topic of topicsFor(membership, m.conv)) {
        app.publish(topic, frame, false);
        pub.publish(CHANNEL + topic, ORIGIN + frame).catch((err: unknown) => console.error('publish failed', err));
      }
    }
  },
  onTopic(topic) {
    if (subscribed.has(topic)) return;
    subscribed.add(topic);
    sub.subscribe(CHANNEL + topic).catch((err: unknown) => console.error('subscribe failed', err));
  },
}));
