import { DemoActivityBody, decode } from '../protocol/schemas.js';
import type { HttpRouter } from '../server/gateway/http.js';

/** Conversations the record keeps; past that the least recently active are forgotten. */
const MAX_CONVERSATIONS = 10_000;

/**
 * The demo's chat-list order, shared by its devices. Redpoint keeps counts, not message times,
 * and a device that opened later cannot know what moved when: so each device reports the newest
 * message it sees arrive (`POST /demo/activity {conv, seq}`), the first report of a higher seq
 * stamps the conversation with the time now, and every device sorts by the same stamps (then by
 * id). Two devices reporting the same message get the same record back. In the dev entry's
 * process only, in memory: a real app orders its list by its own message times.
 */
export function registerDemoActivity(router: HttpRouter): string[] {
  const record = new Map<string, { seq: number; at: number }>();
  const reply = () => ({ body: { activity: Object.fromEntries([...record].map(([conv, r]) => [conv, r.at])) } });

  router.route('get', '/demo/activity', async () => reply(), { name: 'demo' });
  router.route(
    'post',
    '/demo/activity',
    async (ctx) => {
      const { conv, seq } = decode(DemoActivityBody, ctx.body);
      const known = record.get(conv);
      if (!known || seq > known.seq) {
        // Re-inserted, so the Map's order is the order of activity and the oldest goes first.
        record.delete(conv);
        record.set(conv, { seq, at: Math.max(Date.now(), (known?.at ?? 0) + 1) });
        for (const oldest of record.keys()) {
          if (record.size <= MAX_CONVERSATIONS) break;
          record.delete(oldest);
        }
      }
      return reply();
    },
    { body: true, name: 'demo' },
  );
  return ['/demo/activity'];
}
