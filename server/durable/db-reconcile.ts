import { setTimeout as sleep } from 'node:timers/promises';
import type { EngineAdmin } from '../engine/admin.js';
import type { DurableStore, InspectedUser } from '../engine/durable-backing.js';
import type { Engine, UserOp } from '../engine/engine.js';
import { levelOf, type StoredConv } from '../engine/rules.js';
import { decodeRecord, encodeRecord } from '../engine/state-text.js';
import type { ConversationHead, PgStore } from './pg-store.js';

/**
 * `redpoint reconcile --against-db` (docs/durable.md): Redis against PostgreSQL, record by record.
 * A record that carries a dirty mark is on its way and is not compared. Any other record must be
 * the same on both sides; where it is not, one side lost something:
 *
 * - PostgreSQL behind (`db-behind`, `db-missing`, and the conversation kinds `db-head-behind`,
 *   `db-roster-behind`, `db-parent-behind`): Redis changed and the mark that would carry the change is gone. Repair:
 *   mark it again; the drainer writes it.
 * - Redis behind (`redis-behind`, `redis-missing`): Redis still holds the user but lost writes
 *   PostgreSQL has (a failover that dropped the last writes, a restore from an old backup); a
 *   restore on touch cannot help, since nothing is missing. Repair: apply what PostgreSQL holds
 *   as user ops, which only raise registers, so nothing newer in Redis is lowered; readSeq is
 *   lowered or flags taken from PostgreSQL only when its write clock is ahead of the user's in
 *   Redis (then Redis certainly lost that write). The ops mark the records: PostgreSQL then gets
 *   the merged state.
 * - `head-behind` (a conversation's head below PostgreSQL's) is repaired by raising it;
 *   `redis-roster-behind` (a roster older than PostgreSQL's) and `redis-parent-behind` (a topic
 *   child holding an older parent generation than PostgreSQL's: it would take a roster it
 *   refused before) are reported, not repaired here.
 *
 * Users and conversations Redis does not hold at all are not findings: the next touch restores
 * them. Reads are plain commands, not atomic: a finding counts only if a second look `graceMs`
 * later agrees.
 */
export const DB_FINDING_KINDS = {
  'db-behind': 'Redis holds a newer state of the record, unmarked: PostgreSQL would never get it',
  'db-missing': 'a record in Redis with no row in PostgreSQL, unmarked',
  'redis-behind': 'PostgreSQL holds a newer state of the record than Redis (Redis lost writes)',
  'redis-missing': 'a row in PostgreSQL whose record Redis lacks although it holds the user (Redis lost writes)',
  'head-behind': "a conversation's head in Redis is below PostgreSQL's",
  'db-head-behind': "a conversation's head in PostgreSQL is below Redis's, unmarked",
  'db-roster-behind': "a conversation's roster generation in PostgreSQL is below Redis's, unmarked",
  'redis-roster-behind': "a conversation's roster generation in Redis is below PostgreSQL's (not repaired here)",
  'db-parent-behind': "a topic child's parent generation ('#P') in PostgreSQL is below Redis's, unmarked",
  'redis-parent-behind': "a topic child's parent generation ('#P') in Redis is below PostgreSQL's (not repaired here)",
} as const;

type DbFindingKind = keyof typeof DB_FINDING_KINDS;

export interface DbFinding {
  kind: DbFindingKind;
  uid?: string;
  conv: string;
  detail: string;
}

export interface DbReconcilePage {
  /** Where to resume ('' when the walk is done). */
  cursor: string;
  users: number;
  conversations: number;
  /** Users and conversations PostgreSQL holds and Redis does not (restored on touch; not findings). */
  notInRedis: number;
  findings: DbFinding[];
  repaired: DbFinding[];
  unrepaired: DbFinding[];
}

export function emptyDbPage(): DbReconcilePage {
  return { cursor: '', users: 0, conversations: 0, notInRedis: 0, findings: [], repaired: [], unrepaired: [] };
}

export function addDbPage(total: DbReconcilePage, page: DbReconcilePage): void {
  total.cursor = page.cursor;
  total.users += page.users;
  total.conversations += page.conversations;
  total.notInRedis += page.notInRedis;
  total.findings.push(...page.findings);
  total.repaired.push(...page.repaired);
  total.unrepaired.push(...page.unrepaired);
}

export interface DbReconcileOptions {
  repair: boolean;
  graceMs: number;
}

interface PgRow {
  record: StoredConv;
  w: number;
  joinHead: number | null;
}

export class DbReconciler {
  constructor(
    private readonly pg: PgStore,
    private readonly store: DurableStore,
    private readonly engine: Engine,
    private readonly admin: EngineAdmin,
    private readonly options: DbReconcileOptions,
  ) {}

  /**
   * One page of the walk: PostgreSQL's users (`p:<after uid>`), then the users only Redis holds
   * (`r:<scan cursor>`), then PostgreSQL's conversations (`c:<after conv>`).
   */
  async page(cursor: string, count: number): Promise<DbReconcilePage> {
    const [phase, inner] = cursor === '' ? ['p', ''] : [cursor.slice(0, 1), cursor.slice(2)];
    if (!['p', 'r', 'c'].includes(phase) || (cursor !== '' && cursor[1] !== ':')) throw new Error(`not a reconcile --against-db cursor: ${cursor}`);
    if (phase === 'p') {
      const uids = await this.pg.userIds(inner, count);
      const page = await this.checkUsers(uids);
      return { ...page, cursor: uids.length < count ? 'r:' : `p:${uids[uids.length - 1]}` };
    }
    if (phase === 'r') {
      const scan = await this.admin.scanUsers(inner, count);
      const withRows = await this.pg.usersWithRows(scan.ids);
      const page = await this.checkUsers(scan.ids.filter((uid) => !withRows.has(uid)));
      return { ...page, cursor: scan.cursor === '' ? 'c:' : `r:${scan.cursor}` };
    }
    const convs = await this.pg.conversationHeads(inner, count);
    const page = await this.checkConversations(convs);
    return { ...page, cursor: convs.length < count ? '' : `c:${convs[convs.length - 1]?.conv}` };
  }

  /** These users (the CLI's --user with --against-db). */
  async checkUsers(uids: readonly string[]): Promise<DbReconcilePage> {
    const page = emptyDbPage();
    page.users = uids.length;
    let suspects: DbFinding[] = [];
    for (const uid of uids) {
      const { findings, absent } = await this.compareUser(uid);
      if (absent) page.notInRedis++;
      suspects.push(...findings);
    }
    suspects = await this.confirmed(suspects, async (uid) => (await this.compareUser(uid)).findings);
    page.findings = suspects;
    await this.settle(page, async (uid, found) => {
      await this.repairUser(uid, found);
      return (await this.compareUser(uid)).findings;
    });
    return page;
  }

  async checkConversations(convs: readonly ConversationHead[]): Promise<DbReconcilePage> {
    const page = emptyDbPage();
    page.conversations = convs.length;
    const byConv = new Map(convs.map((c) => [c.conv, c]));
    const look = async (conv: string): Promise<DbFinding[]> => {
      const row = byConv.get(conv);
      return row ? ((await this.compareConversation(row)) ?? []) : [];
    };
    let suspects: DbFinding[] = [];
    for (const row of convs) {
      const found = await this.compareConversation(row);
      if (found === null) page.notInRedis++;
      else suspects.push(...found);
    }
    suspects = await this.confirmed(suspects, look, (f) => f.conv);
    page.findings = suspects;
    await this.settle(
      page,
      async (conv, found) => {
        await this.repairConversation(byConv.get(conv), found);
        return look(conv);
      },
      (f) => f.conv,
    );
    return page;
  }

  /** Keeps the suspects a second look after the grace period still finds (same subject, same kind). */
  private async confirmed(
    suspects: DbFinding[],
    again: (subject: string) => Promise<DbFinding[]>,
    subjectOf: (f: DbFinding) => string = (f) => f.uid ?? '',
  ): Promise<DbFinding[]> {
    if (suspects.length === 0 || this.options.graceMs === 0) return suspects;
    await sleep(this.options.graceMs);
    const out: DbFinding[] = [];
    for (const [subject, found] of groupBy(suspects, subjectOf)) {
      const now = await again(subject);
      out.push(...found.filter((f) => now.some((n) => n.kind === f.kind && n.conv === f.conv)));
    }
    return out;
  }

  /** With `repair`: repairs each subject's findings and sorts them into repaired and unrepaired. */
  private async settle(
    page: DbReconcilePage,
    repair: (subject: string, found: DbFinding[]) => Promise<DbFinding[]>,
    subjectOf: (f: DbFinding) => string = (f) => f.uid ?? '',
  ): Promise<void> {
    if (!this.options.repair) {
      page.unrepaired = [...page.findings];
      return;
    }
    for (const [subject, found] of groupBy(page.findings, subjectOf)) {
      const after = await repair(subject, found);
      for (const f of found) (after.some((n) => n.kind === f.kind && n.conv === f.conv) ? page.unrepaired : page.repaired).push(f);
    }
  }

  private async compareUser(uid: string): Promise<{ findings: DbFinding[]; absent: boolean }> {
    const [redis, rows] = await Promise.all([this.store.inspectUser(uid), this.pg.userRows(uid)]);
    // Not in Redis (or only records a join has not reached yet): the next touch restores and merges it.
    if (!redis.present) return { findings: [], absent: rows.length > 0 };
    const byConv = new Map(rows.map((r) => [r.record.conv, r]));
    const findings: DbFinding[] = [];
    for (const conv of new Set([...redis.records.keys(), ...byConv.keys()])) {
      if (redis.marked.has(conv)) continue;
      const kind = judge(redis, conv, byConv.get(conv));
      if (kind) findings.push({ kind, uid, conv, detail: describe(redis, conv, byConv.get(conv)) });
    }
    return { findings, absent: false };
  }

  private async repairUser(uid: string, found: readonly DbFinding[]): Promise<void> {
    const remark = found.filter((f) => f.kind === 'db-behind' || f.kind === 'db-missing').map((f) => f.conv);
    await this.store.markUser(uid, remark);
    const behind = found.filter((f) => f.kind === 'redis-behind' || f.kind === 'redis-missing');
    if (behind.length === 0) return;
    const [redis, rows] = await Promise.all([this.store.inspectUser(uid), this.pg.userRows(uid)]);
    const byConv = new Map(rows.map((r) => [r.record.conv, r]));
    const ops: UserOp[] = [];
    for (const f of behind) {
      const row = byConv.get(f.conv);
      const text = redis.records.get(f.conv);
      if (row) ops.push(...catchUp(uid, row, text === undefined ? undefined : decodeRecord(f.conv, text), row.w > redis.w));
    }
    if (ops.length > 0) await this.engine.applyUserOps(ops, { results: false });
  }

  /** Null: Redis does not hold the conversation (restored on touch). */
  private async compareConversation(row: ConversationHead): Promise<DbFinding[] | null> {
    const redis = await this.store.inspectConversation(row.conv);
    if (!redis) return null;
    const head = Number(redis.head);
    const gen = Number(redis.gen);
    const out: DbFinding[] = [];
    const conv = row.conv;
    if (head < row.maxSeq) out.push({ kind: 'head-behind', conv, detail: `Redis head ${head}, PostgreSQL ${row.maxSeq}` });
    else if (head > row.maxSeq && !redis.marked.h) out.push({ kind: 'db-head-behind', conv, detail: `PostgreSQL head ${row.maxSeq}, Redis ${head}` });
    if (gen < row.gen) out.push({ kind: 'redis-roster-behind', conv, detail: `Redis generation ${gen}, PostgreSQL ${row.gen}` });
    else if (gen > row.gen && !redis.marked.m) out.push({ kind: 'db-roster-behind', conv, detail: `PostgreSQL generation ${row.gen}, Redis ${gen}` });
    // '#P' is written with the roster (the 'm' mark), a max-register on both sides.
    const parentGen = redis.parentGen;
    if (parentGen < row.parentGen) out.push({ kind: 'redis-parent-behind', conv, detail: `Redis parent generation ${parentGen}, PostgreSQL ${row.parentGen}` });
    else if (parentGen > row.parentGen && !redis.marked.m) {
      out.push({ kind: 'db-parent-behind', conv, detail: `PostgreSQL parent generation ${row.parentGen}, Redis ${parentGen}` });
    }
    return out;
  }

  private async repairConversation(row: { conv: string; maxSeq: number } | undefined, found: readonly DbFinding[]): Promise<void> {
    if (!row) return;
    for (const f of found) {
      if (f.kind === 'db-head-behind') await this.store.markConversation('h', f.conv);
      else if (f.kind === 'db-roster-behind' || f.kind === 'db-parent-behind') await this.store.markConversation('m', f.conv);
      else if (f.kind === 'head-behind') await this.engine.recordMessages([{ conv: f.conv, seq: row.maxSeq, candidates: [] }]);
    }
  }
}

/** What is wrong with one unmarked record (undefined: nothing). */
function judge(redis: InspectedUser, conv: string, row: PgRow | undefined): DbFindingKind | undefined {
  const text = redis.records.get(conv);
  if (row === undefined) return text === undefined ? undefined : 'db-missing';
  if (text === undefined) return row.w > redis.w ? 'redis-missing' : 'db-behind';
  const kept = decodeRecord(conv, text);
  if (encodeRecord(kept) === encodeRecord(row.record)) return undefined;
  // A max-register PostgreSQL has higher than Redis: Redis lost that write, whatever the clocks say.
  if (registersAhead(row.record, kept)) return 'redis-behind';
  if (registersAhead(kept, row.record)) return 'db-behind';
  // Same registers, other flags (or a lowered readSeq): the newer write clock holds the truth.
  return row.w > redis.w ? 'redis-behind' : 'db-behind';
}

function registersAhead(a: StoredConv, b: StoredConv): boolean {
  // deletedSeq orders states of one membership only (a join starts it over).
  return a.gen > b.gen || a.lastSeq > b.lastSeq || a.at > b.at || (a.joinGen === b.joinGen && a.deletedSeq > b.deletedSeq) || readAhead(a, b);
}

/** The read register (readGen, readSeq), lexicographic (rules.ts mergeRead). */
function readAhead(a: StoredConv, b: StoredConv): boolean {
  return a.readGen > b.readGen || (a.readGen === b.readGen && a.readSeq > b.readSeq);
}

/**
 * The user ops that bring Redis's record up to PostgreSQL's. Only raises, except with `newer`
 * (PostgreSQL's clock is ahead of the user's in Redis: Redis lost these writes), when the flags
 * are taken from PostgreSQL too. The read register is a lexicographic max-register: a newer read
 * generation in PostgreSQL (an "unread from here", or an operator's reset-read, Redis lost) is a
 * read op of that generation, which sets it.
 */
function catchUp(uid: string, row: PgRow, kept: StoredConv | undefined, newer: boolean): UserOp[] {
  const p = row.record;
  const conv = p.conv;
  const ops: UserOp[] = [];
  if (!kept || p.gen > kept.gen) {
    ops.push(
      p.member
        ? {
            type: 'membership',
            uid,
            conv,
            gen: p.gen,
            member: true,
            joinGen: p.joinGen,
            joinHead: row.joinHead ?? p.readSeq,
            head: p.lastSeq,
            large: p.large,
            category: p.category,
          }
        : { type: 'membership', uid, conv, gen: p.gen, member: false },
    );
  }
  if (p.member && !p.large && p.lastSeq > (kept?.lastSeq ?? 0)) {
    ops.push({ type: 'message', uid, conv, lastSeq: p.lastSeq, readSeq: 0, mentionSeqs: p.mentionSeqs, ...(p.at > 0 ? { at: p.at } : {}) });
  } else if (p.member && p.at > (kept?.at ?? 0)) {
    // Only the last activity is behind (issue 43): a message op of no new seq raises it.
    ops.push({ type: 'message', uid, conv, lastSeq: 0, readSeq: 0, mentionSeqs: [], at: p.at });
  }
  // Non-counting seqs Redis lacks (issue 43): a message op of no new seq adds them (a union).
  if (p.member && p.nocountSeqs.some((seq) => !kept?.nocountSeqs.includes(seq))) {
    ops.push({ type: 'message', uid, conv, lastSeq: 0, readSeq: 0, mentionSeqs: [], nocountSeqs: p.nocountSeqs });
  }
  // After a membership op of a newer join (or on no record) Redis's deletedSeq is -1: a join starts it over.
  const keptDeleted = kept && kept.joinGen === p.joinGen ? kept.deletedSeq : -1;
  if (p.member && p.deletedSeq >= 0 && p.deletedSeq > keptDeleted) ops.push({ type: 'settings', uid, conv, deleteAt: p.deletedSeq });
  if (!kept ? p.readSeq > 0 || p.readGen > 0 : readAhead(p, kept)) ops.push({ type: 'read', uid, conv, seq: p.readSeq, gen: p.readGen });
  if (newer && (!kept || kept.muted !== p.muted || kept.mentionsOnly !== p.mentionsOnly || kept.markedUnread !== p.markedUnread)) {
    ops.push({ type: 'settings', uid, conv, level: levelOf(p), markedUnread: p.markedUnread });
  }
  return ops;
}

function describe(redis: InspectedUser, conv: string, row: PgRow | undefined): string {
  const text = redis.records.get(conv);
  return `Redis ${text ?? 'none'} (user clock ${redis.w}), PostgreSQL ${row ? `${encodeRecord(row.record)} (clock ${row.w})` : 'none'}`;
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}
