/**
 * Baseline (a): raw uWebSockets.js. POST → one tiny frame published to each member's topic (or
 * the large group's topic), reply. No store, no auth, no stream: the floor of a push.
 */
import { pushFrame } from './membership.js';
import { portFromEnv, startRawServer, topicsFor } from './raw-core.js';

await startRawServer(portFromEnv(), (app, membership) => ({
  deliver(messages) {
    for (const m of messages) {
      const frame = pushFrame(m.conv, m.seq);
      for (const topic of topicsFor(membership, m.conv)) app.publish(topic, frame, false);
    }
  },
}));
