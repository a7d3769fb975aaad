import type { Redis } from 'ioredis';

/**
 * Seed 000's design, the one Redpoint replaces: per recipient `HINCRBY unread:{uid} conv 1`,
 * `INCR total_unread:{uid}`, `INCR sync_version:{uid}` and a `PUBLISH` on the user's channel,
 * the whole message pipelined in one round trip. Counters, not registers: a retry counts twice
 * and a read races a message (the drift Redpoint exists to remove); only its cost is compared.
 */
export async function seedMessage(client: Redis, conv: string, recipients: readonly string[]): Promise<void> {
  const p = client.pipeline();
  for (const uid of recipients) {
    p.hincrby(`seed:unread:{${uid}}`, conv, 1);
    p.incr(`seed:total_unread:{${uid}}`);
    p.incr(`seed:sync_version:{${uid}}`);
    p.publish(`seed:bus:{${uid}}`, conv);
  }
  const replies = await p.exec();
  for (const [err] of replies ?? []) if (err) throw err;
}
