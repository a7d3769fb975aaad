import { setTimeout as sleep } from 'node:timers/promises';
import type { ReconcilePage } from '../../protocol/admin-replies.js';
import type { EngineAdmin } from '../engine/admin.js';
import type { Engine } from '../engine/engine.js';
import { checkConversation, checkUser, type Finding } from './checks.js';
import { mapLimit } from './map-limit.js';
import { Repairer } from './reconcile-repair.js';

export interface ReconcileOptions {
  repair: boolean;
  /**
   * A store in use is never still: a membership change or a message is a conversation step
   * followed by user steps, and in between the two disagree for a moment. A finding counts only
   * if it is still there this many ms later (0: at once, for a store nobody writes to).
   */
  graceMs: number;
  /** How the grace period is waited out (default: a timer); tests pass one that waits for an event. */
  graceWait?: (ms: number) => Promise<unknown>;
}

/** What one page (or one list of ids) of a reconcile found and did. */
export type { ReconcilePage };

/** An empty page, to sum pages into (`addPage`). */
export function emptyPage(): ReconcilePage {
  return { cursor: '', users: 0, conversations: 0, midRewrite: 0, findings: [], repaired: [], unrepaired: [] };
}

/** Adds `page` to `total` (a walk's report); the cursor becomes the page's. */
export function addPage(total: ReconcilePage, page: ReconcilePage): void {
  total.cursor = page.cursor;
  total.users += page.users;
  total.conversations += page.conversations;
  total.midRewrite += page.midRewrite;
  total.findings.push(...page.findings);
  total.repaired.push(...page.repaired);
  total.unrepaired.push(...page.unrepaired);
}

/** Users and conversations checked at once within a page. */
const CONCURRENCY = 64;
/** Members of one conversation whose records are read per round trip. */
const MEMBERS_PER_READ = 1_000;

type Subject = { kind: 'user'; id: string } | { kind: 'conv'; id: string };

/**
 * Checks users and conversations against the invariants (checks.ts) and, with `repair`, repairs
 * what it confirmed (reconcile-repair.ts). A walk over the whole store goes users first, then
 * conversations (which find members without any record, invisible from the users' side); its
 * cursor is `u:<scan cursor>` or `c:<scan cursor>`, so it can stop anywhere and resume.
 */
export class Reconciler {
  private readonly repairer: Repairer;

  constructor(
    engine: Engine,
    private readonly admin: EngineAdmin,
    threshold: number,
    private readonly options: ReconcileOptions,
    /** Called once per user or conversation a repair touched (the periodic job logs it). */
    private readonly onRepaired?: (subject: Subject, findings: readonly Finding[]) => void,
  ) {
    this.repairer = new Repairer(engine, admin, threshold);
  }

  /** One page of the walk from `cursor` ('' starts it). */
  async page(cursor: string, count: number): Promise<ReconcilePage> {
    const phase = cursor === '' ? 'u' : cursor.slice(0, 1);
    const inner = cursor === '' ? '' : cursor.slice(2);
    if ((phase !== 'u' && phase !== 'c') || (cursor !== '' && cursor[1] !== ':')) throw new Error(`not a reconcile cursor: ${cursor}`);
    if (phase === 'u') {
      const page = await this.admin.scanUsers(inner, count);
      const result = await this.run(page.ids.map((id) => ({ kind: 'user', id })));
      return { ...result, cursor: page.cursor === '' ? 'c:' : `u:${page.cursor}` };
    }
    const page = await this.admin.scanConversations(inner, count);
    const result = await this.run(page.ids.map((id) => ({ kind: 'conv', id })));
    return { ...result, cursor: page.cursor === '' ? '' : `c:${page.cursor}` };
  }

  /** These users (and nothing else: a conversation listing a user without any record is found by a walk). */
  users(uids: readonly string[]): Promise<ReconcilePage> {
    return this.run(uids.map((id) => ({ kind: 'user', id })));
  }

  conversations(convs: readonly string[]): Promise<ReconcilePage> {
    return this.run(convs.map((id) => ({ kind: 'conv', id })));
  }

  private async run(subjects: Subject[]): Promise<ReconcilePage> {
    const first = await mapLimit(subjects, CONCURRENCY, (s) => this.check(s));
    let suspects = subjects.map((s, i) => ({ s, findings: first[i] ?? [] })).filter((x) => x.findings.length > 0);
    let midRewrite = 0;
    if (suspects.length > 0 && this.options.graceMs > 0) {
      await (this.options.graceWait ?? sleep)(this.options.graceMs);
      const again = await mapLimit(suspects, CONCURRENCY, (x) => this.check(x.s));
      suspects = suspects.map((x, i) => {
        const before = new Set(x.findings.map(key));
        const still = (again[i] ?? []).filter((f) => before.has(key(f)));
        if (x.findings.some((f) => f.kind === 'unfinished-rewrite') && !still.some((f) => f.kind === 'unfinished-rewrite')) midRewrite += 1;
        return { s: x.s, findings: still };
      });
      suspects = suspects.filter((x) => x.findings.length > 0);
    }
    const findings = suspects.flatMap((x) => x.findings);
    const count = (kind: Subject['kind']): number => subjects.filter((s) => s.kind === kind).length;
    const page: ReconcilePage = { cursor: '', users: count('user'), conversations: count('conv'), midRewrite, findings, repaired: [], unrepaired: findings };
    if (!this.options.repair || findings.length === 0) return page;
    const unrepaired: Finding[] = [];
    const repaired: Finding[] = [];
    await mapLimit(suspects, CONCURRENCY, async (x) => {
      if (x.s.kind === 'user') await this.repairer.user(x.s.id);
      else await this.repairer.conversation(x.s.id, x.findings);
      const left = new Set((await this.check(x.s)).map(key));
      for (const f of x.findings) (left.has(key(f)) ? unrepaired : repaired).push(f);
      this.onRepaired?.(x.s, x.findings);
    });
    return { ...page, repaired, unrepaired };
  }

  private async check(s: Subject): Promise<Finding[]> {
    if (s.kind === 'user') {
      const raw = await this.admin.readUser(s.id);
      const views = await this.admin.conversationViews(
        s.id,
        raw.records.map((r) => r.conv),
      );
      return checkUser(raw, views, { streamsExpire: this.admin.streamsExpire });
    }
    const conv = await this.admin.readConversation(s.id);
    if (!conv) return [];
    const records = [];
    for (let i = 0; i < conv.members.length; i += MEMBERS_PER_READ) {
      records.push(...(await this.admin.records(conv.members.slice(i, i + MEMBERS_PER_READ).map((m) => ({ uid: m.uid, conv: s.id })))));
    }
    return checkConversation(conv, records);
  }
}

function key(f: Finding): string {
  return `${f.kind}\u0000${f.uid ?? ''}\u0000${f.conv ?? ''}`;
}
