import { describe, expect, it } from 'vitest';
import type { PullReply } from '../../protocol/types.js';
import { durableStack } from './stack.js';

interface ReceiptsReply {
  seqs: Array<{ seq: number; count: number; readers?: string[] }>;
}

/**
 * Read receipts in the durable tier (PROTOCOL.md "Read receipts"): the positions and the
 * shareReads setting are in PostgreSQL once the call returns, and come back after Redis loses
 * everything: a peer's position, a group's counts, and a user's choice not to share.
 */
describe('durable tier: read receipts survive Redis losing everything', () => {
  const stack = durableStack('receipts', [{ durable: { run: false } }]);
  const peerOf = async (uid: string, conv: string): Promise<number | undefined> =>
    (await stack.server.unread(uid)).conversations.find((c) => c.conv === conv)?.peerReadSeq;

  it('after FLUSHALL the peer positions, group counts and the sharing settings come back from PostgreSQL', async () => {
    const s = stack.server;
    await s.members('rdm', { add: ['ann', 'ben'] });
    await s.members('rgrp', { add: ['ann', 'ben', 'cid'] });
    await s.post([1, 2, 3].map((seq) => ({ conv: 'rdm', seq, sender: 'ben' })));
    await s.post([1, 2].map((seq) => ({ conv: 'rgrp', seq, sender: 'ann' })));
    await s.ok('POST', '/v1/users/ann/read', { conv: 'rdm', seq: 2 });
    await s.ok('POST', '/v1/users/ben/read', { conv: 'rdm', seq: 3 });
    await s.ok('POST', '/v1/users/ben/read', { conv: 'rgrp', seq: 2 });
    await s.ok('POST', '/v1/users/cid/read', { conv: 'rgrp', seq: 1 });
    // cid stops sharing: dropped here and in PostgreSQL, and must stay so after the loss.
    await s.ok('PUT', '/v1/users/cid/settings', { shareReads: false });
    await s.ok('POST', '/v1/users/cid/read', { conv: 'rgrp', seq: 2 });
    const counts = async (): Promise<ReceiptsReply> => s.ok<ReceiptsReply>('GET', '/v1/users/ann/conversations/rgrp/reads?seqs=1,2');
    const before = { ben: await peerOf('ben', 'rdm'), ann: await peerOf('ann', 'rdm'), counts: await counts() };
    expect(before).toEqual({
      ben: 2,
      ann: 3,
      counts: {
        conv: 'rgrp',
        members: 3,
        large: false,
        seqs: [
          { seq: 1, count: 1, readers: ['ben'] },
          { seq: 2, count: 1, readers: ['ben'] },
        ],
      },
    });

    // The conversations and records go by the drainer; the receipts were written through already.
    await s.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();
    expect({ ben: await peerOf('ben', 'rdm'), ann: await peerOf('ann', 'rdm'), counts: await counts() }).toEqual(before);
    const pulled = await s.asUser<PullReply>('ben', 'GET', '/v1/sync');
    expect(pulled.body.peerReads).toEqual({ rdm: 2 });
    // cid's setting came back: still not sharing, so still not recorded and sees no one.
    expect(await s.ok('GET', '/v1/users/cid/settings')).toEqual({ uid: 'cid', shareReads: false, mutedMentions: false });
    await s.ok('POST', '/v1/users/cid/read', { conv: 'rgrp', seq: 2 });
    expect((await counts()).seqs).toEqual([
      { seq: 1, count: 1, readers: ['ben'] },
      { seq: 2, count: 1, readers: ['ben'] },
    ]);
    expect((await s.api('GET', '/v1/users/cid/conversations/rgrp/reads?seqs=1')).status).toBe(403);
    // A position is a max-register across the loss: a lower read changes nothing, a higher one raises it.
    await s.ok('POST', '/v1/users/ann/read', { conv: 'rdm', seq: 1 });
    expect(await peerOf('ben', 'rdm')).toBe(2);
    await s.ok('POST', '/v1/users/ann/read', { conv: 'rdm', seq: 3 });
    expect(await peerOf('ben', 'rdm')).toBe(3);
  });

  it('mutedMentions (issue 43) is in PostgreSQL once PUT returns and comes back after FLUSHALL: the badge still counts the muted mention', async () => {
    const s = stack.server;
    await s.members('mmdm', { add: ['mia', 'max'] });
    await s.ok('PUT', '/v1/users/mia/conversations/mmdm', { level: 'none' });
    await s.post({ conv: 'mmdm', seq: 1, sender: 'max', mentions: ['mia'] });
    await s.ok('PUT', '/v1/users/mia/settings', { mutedMentions: true });
    expect((await s.unread('mia')).total).toBe(1);
    await s.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();
    expect(await s.ok('GET', '/v1/users/mia/settings')).toEqual({ uid: 'mia', shareReads: true, mutedMentions: true });
    const after = await s.unread('mia');
    expect({ total: after.total, mentions: after.mentions, mutedMentions: after.mutedMentions }).toEqual({ total: 1, mentions: 1, mutedMentions: true });
  });

  it('a restored conversation and its positions appear in one step: a reader that finds the conversation back also finds its positions', async () => {
    const s = stack.server;
    await s.members('rstep', { add: ['dee', 'eve'] });
    await s.post([1, 2].map((seq) => ({ conv: 'rstep', seq, sender: 'eve' })));
    await s.ok('POST', '/v1/users/dee/read', { conv: 'rstep', seq: 1 });
    expect(await peerOf('eve', 'rstep')).toBe(1);
    await s.durable?.persister.drainAll(Date.now() + 20_000);
    await stack.admin.flushall();
    // PostgreSQL's positions are held back (a lock) while a first call restores the conversation:
    // a second call meanwhile must not see the conversation without them.
    await stack.sql.query('BEGIN');
    await stack.sql.query('LOCK TABLE redpoint_read_positions IN ACCESS EXCLUSIVE MODE');
    let released = false;
    try {
      const first = peerOf('eve', 'rstep');
      const deadline = Date.now() + 3000;
      while (Date.now() < deadline && (await stack.admin.keys('*{c:rstep}')).length === 0) await new Promise((r) => setTimeout(r, 20));
      const second = peerOf('eve', 'rstep');
      await new Promise((r) => setTimeout(r, 300));
      await stack.sql.query('COMMIT');
      released = true;
      expect(await Promise.all([first, second])).toEqual([1, 1]);
    } finally {
      if (!released) await stack.sql.query('ROLLBACK');
    }
  });
});
