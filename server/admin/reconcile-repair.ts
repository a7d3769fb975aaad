import type { EngineAdmin } from '../engine/admin.js';
import type { Engine, UserOp } from '../engine/engine.js';
import { changeMembership, memberOp } from '../sync/membership.js';
import { checkDerived, type Finding } from './checks.js';
import { deleteConversation } from './delete-conversation.js';

/**
 * How each kind of finding is repaired. Records are only ever changed through
 * `Engine.applyUserOps` with the op the rules would have applied: the membership op the
 * conversation's roster implies (same generation, join generation and join head), a leave, or a
 * message at the conversation's head. What the records determine (totals, counts, the index, the
 * stream) is then rebuilt from them in one atomic step, the stream under a new epoch. Every
 * repair reads the state again first and is idempotent: running it twice, or racing live
 * traffic, converges to what the rules give.
 */
export class Repairer {
  constructor(
    private readonly engine: Engine,
    private readonly admin: EngineAdmin,
    private readonly threshold: number,
  ) {}

  async user(uid: string): Promise<void> {
    let raw = await this.admin.readUser(uid);
    let views = await this.admin.conversationViews(
      uid,
      raw.records.map((r) => r.conv),
    );
    // A record newer than its conversation: raise the conversation's generation above it, so the
    // roster's op (below) wins as the rules order it.
    const ahead = raw.records.filter((rec) => {
      const info = views.get(rec.conv)?.info;
      return info && rec.gen > info.gen;
    });
    if (ahead.length > 0) {
      for (const rec of ahead) await this.admin.repairConversation(rec.conv, rec.gen + 1);
      views = await this.admin.conversationViews(
        uid,
        raw.records.map((r) => r.conv),
      );
    }
    const ops: UserOp[] = [];
    for (const rec of raw.records) {
      const view = views.get(rec.conv);
      const info = view?.info;
      if (!view?.exists || !info) {
        if (rec.member) ops.push({ type: 'membership', uid, conv: rec.conv, gen: rec.gen, member: false });
        continue;
      }
      if (!view.tag) {
        if (rec.member) ops.push({ type: 'membership', uid, conv: rec.conv, gen: info.gen, member: false });
        continue;
      }
      const stale = !rec.member || rec.joinGen !== view.tag.joinGen || (view.rewrite === 0 && (rec.large !== info.large || rec.category !== info.category));
      if (stale) ops.push(memberOp(info, { uid, ...view.tag }));
      if (!info.large && rec.lastSeq < info.maxSeq) ops.push({ type: 'message', uid, conv: rec.conv, lastSeq: info.maxSeq, readSeq: 0, mentionSeqs: [] });
    }
    if (ops.length > 0) {
      await this.engine.applyUserOps(ops);
      raw = await this.admin.readUser(uid);
    }
    const derived = checkDerived(raw, { streamsExpire: this.admin.streamsExpire });
    if (derived.length > 0) await this.admin.rebuildUser(uid, { restream: derived.some((f) => f.kind === 'stream' || f.kind === 'snapshot') });
  }

  /** A conversation's own findings, and each listed member whose record is not that membership. */
  async conversation(conv: string, findings: readonly Finding[]): Promise<void> {
    const kinds = new Set(findings.map((f) => f.kind));
    if (kinds.has('unfinished-delete')) {
      await deleteConversation(this.engine, this.admin, conv);
      return;
    }
    if (kinds.has('conv-member-count')) await this.admin.repairConversation(conv, 0);
    // An empty membership change finds the pending rewrite and finishes it (membership.ts).
    if (kinds.has('unfinished-rewrite')) await changeMembership(this.engine, this.threshold, conv, { add: [], remove: [] });
    const missing = new Set(findings.filter((f) => f.kind === 'missing-join' && f.uid !== undefined).map((f) => f.uid as string));
    if (missing.size === 0) return;
    const raw = await this.admin.readConversation(conv);
    if (!raw || raw.deleting) return;
    const ops = raw.members.filter((tag) => missing.has(tag.uid)).map((tag) => memberOp(raw.info, tag));
    await this.engine.applyUserOps(ops);
  }
}
