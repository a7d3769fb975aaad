import { startRedisServer } from '../../test/helpers/redis-server.js';
import type { JsonWsClient } from '../clients/json-ws.js';
import { mintTokens, redpointSocket } from '../clients/redpoint-ws.js';
import { eachLimited } from '../lib/http.js';
import { atMost, emptyReport, fmt, type Section } from '../lib/section.js';
import { fmtRate } from '../lib/table.js';
import { BENCH_API_KEY, BENCH_JWT_SECRET, type RunningSystem, SYSTEMS, startSystem } from '../systems.js';
import { directMesh } from './engine-setup.js';
import { createMeshOverHttp } from './setup.js';

const TARGET_OUT_OF_ORDER = 0.001;
const POSTS_IN_FLIGHT_PER_SERVER = 16;

interface OrderCounts {
  pushes: number;
  /** A version at or below one the client already had (reordered or repeated). */
  outOfOrder: number;
  /** A version past the next one (a push lost, or one still to come out of order). */
  gaps: number;
}

/**
 * Two Redpoint processes on one Redis; every client is connected to the first; messages are
 * ingested through both at once, alternately, for the same conversations. Each client checks
 * that its pushes come in version order (DESIGN.md §9: a user's pushes leave in version order,
 * whichever process made the change).
 */
export const orderSection: Section = {
  id: 'order',
  title: 'Push order across two server processes',
  inDefaultPlan: true,
  async run(ctx) {
    const users = ctx.options.quick ? 500 : 2000;
    const seconds = ctx.options.quick ? 5 : 15;
    const report = emptyReport(this.id, this.title);
    const redis = await startRedisServer();
    const servers: RunningSystem[] = [];
    const clients: JsonWsClient[] = [];
    try {
      for (const name of ['A', 'B']) servers.push(await startSystem(SYSTEMS['redpoint-redis'], { redisUrl: redis.url, name: `redpoint-redis ${name}` }));
      const [a, _b] = servers as [RunningSystem, RunningSystem];
      const mesh = directMesh('o', users, 2);
      await createMeshOverHttp(a.http, mesh.convs);
      const tokens = await mintTokens(BENCH_JWT_SECRET, BENCH_API_KEY, mesh.users);
      const counts: OrderCounts = { pushes: 0, outOfOrder: 0, gaps: 0 };
      await eachLimited(mesh.users, 50, async (uid) => {
        let last: number | undefined;
        clients.push(
          await redpointSocket(a.port, uid, tokens.get(uid) as string, (frame) => {
            if (frame.t === 'sync') last = Math.max(last ?? 0, frame.version);
            if (frame.t !== 'change' || last === undefined) return;
            counts.pushes += 1;
            if (frame.v <= last) counts.outOfOrder += 1;
            else if (frame.v > last + 1) counts.gaps += 1;
            last = Math.max(last, frame.v);
          }),
        );
      });

      const seqs = new Map<string, number>();
      let next = 0;
      const posted = [0, 0];
      let errors = 0;
      const end = performance.now() + seconds * 1000;
      await Promise.all(
        servers.flatMap((server, s) =>
          Array.from({ length: POSTS_IN_FLIGHT_PER_SERVER }, async () => {
            while (performance.now() < end) {
              const c = mesh.convs[next++ % mesh.convs.length] as { conv: string; a: string; b: string };
              const seq = (seqs.get(c.conv) ?? 0) + 1;
              seqs.set(c.conv, seq);
              const reply = await server.http.send('POST', '/v1/messages', { conv: c.conv, seq, sender: seq % 2 === 1 ? c.a : c.b }).catch(() => undefined);
              if (reply?.status === 200) posted[s] = (posted[s] ?? 0) + 1;
              else errors += 1;
            }
          }),
        ),
      );
      const ratio = counts.outOfOrder / Math.max(1, counts.pushes);
      report.method.push(
        `Two Redpoint processes (A, B) on one redis-server. ${users.toLocaleString('en-US')} users in 1:1 conversations with each other (2 each), every user connected to A. For ${seconds} s, ${POSTS_IN_FLIGHT_PER_SERVER} POSTs in flight to each process, messages round-robin over the conversations, so both processes ingest the same conversations at the same moments (both members of each get a push: the receiver's unread, the sender's read). Each client checks the versions of its \`change\` pushes against the last it had (starting from its first sync).`,
      );
      report.tables.push({
        caption: 'Pushes at the clients (all connected to A)',
        table: {
          header: ['messages via A', 'via B', 'messages/s', 'pushes', 'out of order', 'share', 'gaps', 'POST errors'],
          rows: [
            [
              fmt.int(posted[0] ?? 0),
              fmt.int(posted[1] ?? 0),
              fmtRate(((posted[0] ?? 0) + (posted[1] ?? 0)) / seconds),
              fmt.int(counts.pushes),
              fmt.int(counts.outOfOrder),
              fmt.pct(ratio),
              fmt.int(counts.gaps),
              String(errors),
            ],
          ],
        },
      });
      report.verdicts.push(atMost('pushes received out of version order', ratio, TARGET_OUT_OF_ORDER, fmt.pct));
      report.notes.push(
        '`gaps`: a push more than one version ahead of the client (a push lost, e.g. skipped under backpressure); the client would pull. Not out of order as such, but listed because reordering would show there first.',
      );
      report.data = { users, seconds, posted, errors, ...counts };
      return report;
    } finally {
      for (const c of clients) c.close();
      await Promise.allSettled(servers.map((s) => s.stop()));
      await redis.stop();
    }
  },
};
