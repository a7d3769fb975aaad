import { withDurableEngine } from './durable-connect.js';
import { progressBar, rateSince } from './progress.js';

const PAGE = 500;

/**
 * `redpoint restore`: warms every user PostgreSQL holds into Redis now instead of on first
 * touch (after Redis lost its data), at most `rate` users a second, then marks Redis intact:
 * from then on, while PostgreSQL is down, a user missing from Redis is a new one (docs/durable.md).
 * Each user is restored exactly as a touch would (atomic, never over a newer Redis state).
 */
export async function restoreCommand(
  args: { rate: number; json: boolean; progress: boolean },
  out: (text: string) => void,
  interrupted: () => boolean,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  let restored = 0;
  let present = 0;
  return withDurableEngine(
    'restore',
    env,
    async ({ tier, engine, store }) => {
      const total = Number((await tier.pg.pool.query<{ n: string }>('SELECT count(DISTINCT uid) AS n FROM redpoint_user_conv')).rows[0]?.n ?? 0);
      const bar = args.progress ? progressBar('restore', 'users') : undefined;
      bar?.start(total, 0, { detail: '' });
      const started = performance.now();
      let done = 0;
      let after = '';
      for (;;) {
        if (interrupted()) break;
        const page = await tier.pg.userIds(after, PAGE);
        if (page.length === 0) break;
        for (const uid of page) {
          const before = restored;
          await engine.position(uid);
          if (restored === before) present++;
          done++;
          // The rate limit: never ahead of `rate` users per second since the start.
          const ahead = done / args.rate - (performance.now() - started) / 1000;
          if (ahead > 0) await new Promise((resolve) => setTimeout(resolve, ahead * 1000));
          bar?.update(done, { detail: `${restored} restored` });
        }
        after = page[page.length - 1] as string;
      }
      bar?.stop();
      const complete = !interrupted();
      if (complete) await store.markIntact(true);
      const report = {
        users: done,
        restored,
        alreadyInRedis: present,
        seconds: (performance.now() - started) / 1000,
        rate: rateSince(started, done),
        markedIntact: complete,
      };
      out(
        args.json
          ? `${JSON.stringify(report)}\n`
          : `restore: ${done} users (${restored} restored, ${present} already in Redis) in ${report.seconds.toFixed(1)} s${complete ? '; Redis marked intact' : '; interrupted: Redis not marked intact'}\n`,
      );
      return complete ? 0 : 1;
    },
    (kind, n) => void (kind === 'user' && (restored += n)),
  );
}
