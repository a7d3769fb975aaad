import { Type } from '@sinclair/typebox';
import { RedpointError } from '../protocol/errors.js';
import type { DemoKeptMessage } from '../protocol/replies.js';
import { ConvRef, DemoActivityBody, decode } from '../protocol/schemas.js';
import type { HttpRouter } from '../server/gateway/http.js';

/**
 * The report's body, keyed by a row's id: a topic's row (`<conv>#t:<topic>`, PROTOCOL.md "Topics")
 * has its own seqs and messages. protocol/schemas.ts still says `Id` for `conv` (and so the
 * OpenAPI document); it should say `ConvRef` as this does.
 */
const ActivityBody = Type.Object({ ...DemoActivityBody.properties, conv: ConvRef }, { additionalProperties: false });

/** Conversations the record keeps; past that the least recently active are forgotten. */
const MAX_CONVERSATIONS = 10_000;
/** Sent messages kept per conversation (the newest). */
const MAX_MESSAGES = 20;

interface Activity {
  seq: number;
  at: number;
  messages: DemoKeptMessage[];
}

/**
 * The demo's chat-list order and message texts, shared by its devices. Redpoint keeps counts,
 * not messages or their times, and a device that opened later cannot know what moved when. So:
 * - each device reports the newest message it sees arrive (`POST /demo/activity {conv, seq}`),
 *   and the first report of a higher seq stamps the conversation with the time now;
 * - the page's test tools report what they sent (`messages`: sender, text, how long ago, and
 *   what kind: a reaction, an @all, a recall naming the seq it recalls), and a sent message's own
 *   time is the stamp of its seq whichever report came first;
 * every device sorts by the same stamps (then by id) and shows the same texts. In the dev
 * entry's process only, in memory: a real app orders its list by its own message times (and
 * until Redpoint carries a message time, devices stamping by what they saw may disagree).
 */
export function registerDemoActivity(router: HttpRouter): string[] {
  const record = new Map<string, Activity>();
  const reply = () => ({
    body: {
      activity: Object.fromEntries([...record].map(([conv, r]) => [conv, r.at])),
      messages: Object.fromEntries([...record].filter(([, r]) => r.messages.length > 0).map(([conv, r]) => [conv, r.messages])),
    },
  });

  router.route('get', '/demo/activity', async () => reply(), { name: 'demo' });
  router.route(
    'post',
    '/demo/activity',
    async (ctx) => {
      const { conv, seq, messages = [] } = decode(ActivityBody, ctx.body);
      const beyond = messages.find((m) => m.seq > seq);
      if (beyond) throw new RedpointError('invalid_request', `messages[].seq ${beyond.seq} is past the report's seq ${seq}: report the newest seq sent`);
      // A recall names the earlier message it recalls, and only a recall does (the page shows that one as recalled).
      const odd = messages.find((m) => (m.kind === 'recall') !== (m.recalls !== undefined) || (m.recalls ?? 0) >= m.seq);
      if (odd) throw new RedpointError('invalid_request', `messages[].recalls (seq ${odd.seq}): a recall, and only a recall, names an earlier seq it recalls`);
      const now = Date.now();
      const known = record.get(conv) ?? { seq: 0, at: 0, messages: [] };
      const bySeq = new Map(known.messages.map((m) => [m.seq, m]));
      for (const { agoMs, ...m } of messages) bySeq.set(m.seq, { ...m, at: now - agoMs });
      const kept = [...bySeq.values()].sort((a, b) => a.seq - b.seq).slice(-MAX_MESSAGES);
      const newest = kept.at(-1);
      let { seq: headSeq, at } = known;
      if (messages.length > 0 && newest && newest.seq >= headSeq) {
        // The sender's own time beats a device's "seen now" for the same message.
        ({ seq: headSeq, at } = newest);
      } else if (seq > headSeq) {
        headSeq = seq;
        at = Math.max(now, known.at + 1);
      }
      // Re-inserted, so the Map's order is the order of reports and the oldest goes first.
      record.delete(conv);
      record.set(conv, { seq: headSeq, at, messages: kept });
      for (const oldest of record.keys()) {
        if (record.size <= MAX_CONVERSATIONS) break;
        record.delete(oldest);
      }
      return reply();
    },
    { body: true, name: 'demo' },
  );
  return ['/demo/activity'];
}
