import pg from 'pg';
import type { DurableBacking, PersistedConversation, PersistedRecord, PersistedUser } from '../engine/durable-backing.js';
import type { StoredConv } from '../engine/rules.js';
import { decodeRecordFast } from '../engine/state-text.js';
import { PgReadPositions } from './pg-read-positions.js';
import { PgRegistry, THREADS_TABLE, TOPICS_TABLE } from './pg-registries.js';

/**
 * PostgreSQL, the system of record behind Redis (schema.ts). Writes are idempotent and
 * order-insensitive: gen merges with GREATEST, lastSeq and deletedSeq with GREATEST within one
 * membership (a newer join_gen's wins: a join, or an operator's rebase, starts them over), a
 * conversation's head by the generation it was read at (`head_gen`, then GREATEST), the read
 * register (readSeq, its generation and the mention lists) by its generation `read_gen` then `w`,
 * and every other column of a user's record is taken from the row read at the larger write clock `w`, so a replay or two drainers racing can
 * never put an older state over a newer one. Conversations order by their membership generation.
 */
/** A conversation's row as the reconcile against the database compares it with Redis. */
export interface ConversationHead {
  conv: string;
  maxSeq: number;
  gen: number;
  /** A topic's child: the parent generation of the newest roster synced into it (conv_members.lua '#P'; 0: none). */
  parentGen: number;
}

export class PgStore implements DurableBacking {
  /** Read receipts' tables. */
  readonly readPositions: PgReadPositions;
  /** Topic registries. */
  readonly topics: PgRegistry;
  /** Thread registries. */
  readonly threads: PgRegistry;

  constructor(readonly pool: pg.Pool) {
    this.readPositions = new PgReadPositions(pool);
    this.topics = new PgRegistry(pool, TOPICS_TABLE);
    this.threads = new PgRegistry(pool, THREADS_TABLE);
  }

  static connect(url: string, options: { max?: number; statementTimeoutMs?: number } = {}): PgStore {
    const pool = new pg.Pool({
      connectionString: url,
      max: options.max ?? 4,
      connectionTimeoutMillis: 2_000,
      statement_timeout: options.statementTimeoutMs ?? 10_000,
      idleTimeoutMillis: 30_000,
    });
    // A pooled client that dies while idle (PostgreSQL restarted) emits 'error' on the pool: the
    // next query finds out and the drainer logs the state change; unhandled, it would crash.
    pool.on('error', () => undefined);
    return new PgStore(pool);
  }

  /**
   * Writes records as read from Redis in one transaction: the present ones upserted, the gone
   * ones deleted (only where the stored row is not newer). Returns rows written.
   */
  async writeRecords(records: readonly PersistedRecord[]): Promise<number> {
    const up: Columns = emptyColumns();
    const gone = { uid: [] as string[], conv: [] as string[], w: [] as string[] };
    // Rows in key order: upserts from several drainers (processes, or chunks of one) then lock
    // shared rows in the same order, so they wait on each other but never deadlock.
    const inKeyOrder = [...records].sort((a, b) => byText(a.uid, b.uid) || byText(a.conv, b.conv));
    for (const r of inKeyOrder) {
      if (r.text === null) {
        gone.uid.push(r.uid);
        gone.conv.push(r.conv);
        gone.w.push(String(r.w));
      } else pushRecord(up, r.uid, decodeRecordFast(r.conv, r.text), r.w);
    }
    if (up.uid.length === 0 && gone.uid.length === 0) return 0;
    // One statement is its own transaction: BEGIN and COMMIT would be two more round trips.
    // Named: parsed and planned once per connection, not for every chunk (with three chunks in
    // flight, a 500-row upsert took ~45 ms unnamed and ~15 ms named).
    if (gone.uid.length === 0) {
      const values = columnArrays(up);
      await againIfDeadlocked(() => this.pool.query({ name: 'redpoint_upsert_records', text: UPSERT_RECORDS, values }));
    } else if (up.uid.length === 0) await againIfDeadlocked(() => this.pool.query(DELETE_RECORDS, [gone.uid, gone.conv, gone.w]));
    else {
      await this.transaction(async (client) => {
        await client.query(UPSERT_RECORDS, columnArrays(up));
        await client.query(DELETE_RECORDS, [gone.uid, gone.conv, gone.w]);
      });
    }
    return up.uid.length + gone.uid.length;
  }

  /** Raises conversations' heads (a row not there yet gets one, completed by its membership's drain). */
  /** Heads as read from Redis, each with the conversation's generation read with it. */
  async writeHeads(
    heads: ReadonlyArray<{ conv: string; maxSeq: number; gen: number; at?: number; mentionAll?: readonly number[]; nocount?: readonly number[] }>,
  ): Promise<void> {
    if (heads.length === 0) return;
    // In key order, as the rosters' rows: two drainers' heads, or heads and a roster batch, lock
    // shared rows in one order. Other writers of these rows (a deletion) can still cross them,
    // and the statement is all or nothing and idempotent: a deadlock's victim runs again.
    const inKeyOrder = [...heads].sort((a, b) => byText(a.conv, b.conv));
    const values = [
      inKeyOrder.map((h) => h.conv),
      inKeyOrder.map((h) => String(h.maxSeq)),
      inKeyOrder.map((h) => String(h.gen)),
      inKeyOrder.map((h) => String(h.at ?? 0)),
      inKeyOrder.map((h) => `{${(h.mentionAll ?? []).join(',')}}`),
      inKeyOrder.map((h) => `{${(h.nocount ?? []).join(',')}}`),
    ];
    await againIfDeadlocked(() => this.pool.query(UPSERT_HEADS, values));
  }

  /** A conversation's whole state: replaces its roster and head unless the stored generation is newer. */
  writeConversation(conv: string, state: PersistedConversation): Promise<void> {
    return this.writeConversations([{ conv, state }]);
  }

  /**
   * Several conversations' whole states in one transaction of a few statements (the drainer's
   * rosters: one transaction each took ~8 round trips, ~300 rosters a second). Per conversation as
   * writeConversation: nothing at or below its deletion's tombstone, nothing where the stored
   * generation is newer (its head too was read after this one: a head read at an older generation
   * may be one a rebase lowered since), otherwise the row and its members replaced.
   */
  async writeConversations(items: ReadonlyArray<{ conv: string; state: PersistedConversation }>): Promise<void> {
    const byConv = new Map<string, PersistedConversation>();
    for (const { conv, state } of items) byConv.set(conv, state);
    if (byConv.size === 0) return;
    const convs = [...byConv.keys()].sort();
    await this.transaction(async (client) => {
      // The conversations' locks in the order of their keys: two drainers' batches wait on each
      // other but never deadlock, and a deletion (one lock) never interleaves with a roster.
      await client.query('SELECT count(pg_advisory_xact_lock($1, h)) FROM (SELECT DISTINCT hashtext(c) AS h FROM unnest($2::text[]) AS c ORDER BY h) AS k', [
        CONVERSATION_LOCK,
        convs,
      ]);
      // Read after the locks: a deletion that committed before them is seen here.
      const deleted = await client.query<{ conv: string; gen: string }>('SELECT conv, gen FROM redpoint_deleted_conversations WHERE conv = ANY($1::text[])', [
        convs,
      ]);
      const stored = await client.query<{ conv: string; gen: string }>(
        'SELECT conv, gen FROM redpoint_conversations WHERE conv = ANY($1::text[]) ORDER BY conv FOR UPDATE',
        [convs],
      );
      const tombstone = new Map(deleted.rows.map((r) => [r.conv, Number(r.gen)]));
      const storedGen = new Map(stored.rows.map((r) => [r.conv, Number(r.gen)]));
      const whole: Array<{ conv: string; state: PersistedConversation }> = [];
      for (const conv of convs) {
        const state = byConv.get(conv) as PersistedConversation;
        const gone = tombstone.get(conv);
        if (gone !== undefined && gone >= state.gen) continue;
        const gen = storedGen.get(conv);
        if (gen === undefined || gen <= state.gen) whole.push({ conv, state });
      }
      if (whole.length === 0) return;
      await client.query(UPSERT_CONVERSATIONS, [
        whole.map((w) => w.conv),
        whole.map((w) => String(w.state.maxSeq)),
        whole.map((w) => w.state.large),
        whole.map((w) => w.state.category),
        whole.map((w) => String(w.state.gen)),
        whole.map((w) => (w.state.rewriteGen === null ? null : String(w.state.rewriteGen))),
        whole.map((w) => String(w.state.largeFrom ?? 0)),
        whole.map((w) => String(w.state.parentGen ?? 0)),
      ]);
      const members = { conv: [] as string[], uid: [] as string[], joinGen: [] as string[], joinHead: [] as string[] };
      for (const { conv, state } of whole) {
        for (const m of [...state.members].sort((a, b) => byText(a.uid, b.uid))) {
          members.conv.push(conv);
          members.uid.push(m.uid);
          members.joinGen.push(String(m.joinGen));
          members.joinHead.push(String(m.joinHead));
        }
      }
      await client.query(DELETE_FORMER_MEMBERS, [whole.map((w) => w.conv), members.conv, members.uid]);
      for (let i = 0; i < members.conv.length; i += MEMBER_ROWS_PER_STATEMENT) {
        const end = i + MEMBER_ROWS_PER_STATEMENT;
        await client.query(UPSERT_MEMBERS, [
          members.conv.slice(i, end),
          members.uid.slice(i, end),
          members.joinGen.slice(i, end),
          members.joinHead.slice(i, end),
        ]);
      }
    });
  }

  /**
   * `work` in one transaction on a pooled client (rolled back on any error). A transaction
   * PostgreSQL chose as a deadlock's victim runs again: a roster batch locks members of several
   * conversations and an erasure one user's memberships in several, so the two can cross (rarely:
   * both must touch two of one user's memberships at once), and `work` is all or nothing.
   */
  private transaction(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    return againIfDeadlocked(() => this.transactionOnce(work));
  }

  private async transactionOnce(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    const client = await this.pool.connect();
    // A checked-out client that loses its server emits 'error' (the query in flight rejects too):
    // unheard, it would crash the process.
    const ignore = (): void => undefined;
    client.on('error', ignore);
    let failed = false;
    try {
      await client.query('BEGIN');
      await work(client);
      await client.query('COMMIT');
    } catch (err) {
      failed = true;
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.off('error', ignore);
      // A client whose transaction failed may have lost its connection: it does not go back to the pool.
      client.release(failed);
    }
  }

  /**
   * The conversations held whose id starts with `prefix` (the operator's delete: a conversation's
   * thread children, admin/toolbox.ts). A scan of the table (no pattern index): operator calls only.
   */
  async conversationsUnder(prefix: string): Promise<string[]> {
    const { rows } = await this.pool.query<{ conv: string }>('SELECT conv FROM redpoint_conversations WHERE starts_with(conv, $1)', [prefix]);
    return rows.map((r) => r.conv);
  }

  /** Deleting a conversation (`DELETE /v1/conversations/:conv`) at generation `gen` (conv_delete.lua) removes its rows and leaves a tombstone. */
  async deleteConversation(conv: string, gen: number): Promise<void> {
    await this.transaction(async (client) => {
      // With writeConversation's: a roster write and a deletion of one conversation never interleave.
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [CONVERSATION_LOCK, conv]);
      await client.query(
        `INSERT INTO redpoint_deleted_conversations (conv, gen) VALUES ($1, $2)
         ON CONFLICT (conv) DO UPDATE SET gen = GREATEST(redpoint_deleted_conversations.gen, EXCLUDED.gen), deleted_at = now()`,
        [conv, gen],
      );
      await client.query('DELETE FROM redpoint_conv_members WHERE conv = $1', [conv]);
      await client.query('DELETE FROM redpoint_conversations WHERE conv = $1', [conv]);
      // A tombstone outlives any drain pass in flight (seconds); a day later it goes.
      await client.query("DELETE FROM redpoint_deleted_conversations WHERE deleted_at < now() - interval '1 day'");
    });
  }

  async loadUsers(uids: readonly string[]): Promise<Map<string, PersistedUser>> {
    const out = new Map<string, PersistedUser>();
    if (uids.length === 0) return out;
    const { rows } = await this.pool.query<RecordRow>(`SELECT ${RECORD_COLUMNS} FROM redpoint_user_conv WHERE uid = ANY($1::text[])`, [uids]);
    for (const row of rows) {
      let user = out.get(row.uid);
      if (!user) out.set(row.uid, (user = { w: 0, records: [] }));
      user.w = Math.max(user.w, Number(row.w));
      user.records.push(recordOf(row));
    }
    return out;
  }

  async loadConversations(convs: readonly string[]): Promise<Map<string, PersistedConversation>> {
    const out = new Map<string, PersistedConversation>();
    if (convs.length === 0) return out;
    const [head, members] = await Promise.all([
      this.pool.query<{
        conv: string;
        max_seq: string;
        large: boolean;
        category: string;
        gen: string;
        rewrite_gen: string | null;
        last_at: string;
        mention_all: string[];
        large_from: string;
        nocount_seqs: string[];
        parent_gen: string;
      }>(
        `SELECT conv, max_seq, large, category, gen, rewrite_gen, last_at, mention_all, large_from, nocount_seqs, parent_gen FROM redpoint_conversations c WHERE conv = ANY($1::text[]) AND ${NOT_DELETED}`,
        [convs],
      ),
      this.pool.query<{ conv: string; uid: string; join_gen: string; join_head: string }>(
        'SELECT conv, uid, join_gen, join_head FROM redpoint_conv_members WHERE conv = ANY($1::text[])',
        [convs],
      ),
    ]);
    for (const row of head.rows) {
      out.set(row.conv, {
        maxSeq: Number(row.max_seq),
        large: row.large,
        category: row.category,
        gen: Number(row.gen),
        rewriteGen: row.rewrite_gen === null ? null : Number(row.rewrite_gen),
        members: [],
        at: Number(row.last_at),
        mentionAll: row.mention_all.map(Number),
        largeFrom: Number(row.large_from),
        nocount: row.nocount_seqs.map(Number),
        parentGen: Number(row.parent_gen),
      });
    }
    for (const row of members.rows) out.get(row.conv)?.members.push({ uid: row.uid, joinGen: Number(row.join_gen), joinHead: Number(row.join_head) });
    return out;
  }

  /**
   * One user's rows as the reconcile against the database compares them: each record with the
   * write clock it was read at, and the join head its conversation's roster holds for the user.
   */
  async userRows(uid: string): Promise<Array<{ record: StoredConv; w: number; joinHead: number | null }>> {
    const { rows } = await this.pool.query<RecordRow & { join_head: string | null }>(
      `SELECT ${RECORD_COLUMNS.split(', ')
        .map((c) => `r.${c}`)
        .join(', ')}, m.join_head FROM redpoint_user_conv r
         LEFT JOIN redpoint_conv_members m ON m.conv = r.conv AND m.uid = r.uid WHERE r.uid = $1`,
      [uid],
    );
    return rows.map((row) => ({ record: recordOf(row), w: Number(row.w), joinHead: row.join_head === null ? null : Number(row.join_head) }));
  }

  /** Which of `uids` have any row. */
  async usersWithRows(uids: readonly string[]): Promise<Set<string>> {
    if (uids.length === 0) return new Set();
    const { rows } = await this.pool.query<{ uid: string }>('SELECT DISTINCT uid FROM redpoint_user_conv WHERE uid = ANY($1::text[])', [uids]);
    return new Set(rows.map((r) => r.uid));
  }

  /** Conversations in pages by id: head, membership generation and a topic child's parent generation (the reconcile against the database). */
  async conversationHeads(after: string, limit: number): Promise<ConversationHead[]> {
    const { rows } = await this.pool.query<{ conv: string; max_seq: string; gen: string; parent_gen: string }>(
      `SELECT conv, max_seq, gen, parent_gen FROM redpoint_conversations c WHERE conv > $1 AND ${NOT_DELETED} ORDER BY conv LIMIT $2`,
      [after, limit],
    );
    return rows.map((r) => ({ conv: r.conv, maxSeq: Number(r.max_seq), gen: Number(r.gen), parentGen: Number(r.parent_gen) }));
  }

  /** Heads and membership generations of these conversations (those with a row). */
  async conversationVersions(convs: readonly string[]): Promise<Map<string, { maxSeq: string; gen: string }>> {
    const out = new Map<string, { maxSeq: string; gen: string }>();
    if (convs.length === 0) return out;
    const { rows } = await this.pool.query<{ conv: string; max_seq: string; gen: string }>(
      `SELECT conv, max_seq, gen FROM redpoint_conversations c WHERE conv = ANY($1::text[]) AND ${NOT_DELETED}`,
      [convs],
    );
    for (const row of rows) out.set(row.conv, { maxSeq: row.max_seq, gen: row.gen });
    return out;
  }

  /** Erasing a user (DELETE /v1/users/:uid, `redpoint erase`) removes their rows and memberships here too. */
  async eraseUser(uid: string, now = Date.now()): Promise<void> {
    await this.transaction(async (client) => {
      // The tombstone outlives any drain pass in flight (seconds); a day later it goes.
      await client.query(
        `INSERT INTO redpoint_erased (uid, w) VALUES ($1, $2)
         ON CONFLICT (uid) DO UPDATE SET w = GREATEST(redpoint_erased.w, EXCLUDED.w), erased_at = now()`,
        [uid, now],
      );
      await client.query('DELETE FROM redpoint_user_conv WHERE uid = $1', [uid]);
      await client.query('DELETE FROM redpoint_conv_members WHERE uid = $1', [uid]);
      await client.query("DELETE FROM redpoint_erased WHERE erased_at < now() - interval '1 day'");
    });
  }

  /** Every user id with a row, in pages (for `redpoint restore` and the reconcile against the database). */
  async userIds(after: string, limit: number): Promise<string[]> {
    const { rows } = await this.pool.query<{ uid: string }>('SELECT DISTINCT uid FROM redpoint_user_conv WHERE uid > $1 ORDER BY uid LIMIT $2', [after, limit]);
    return rows.map((r) => r.uid);
  }

  /** True when no user row exists yet (a tier starting over an empty database). */
  async isEmpty(): Promise<boolean> {
    const { rows } = await this.pool.query('SELECT 1 FROM redpoint_user_conv LIMIT 1');
    return rows.length === 0;
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}

/** Rows of one members statement (each its 4 arrays): bounded, so a 100k-member roster is many statements in one transaction. */
const MEMBER_ROWS_PER_STATEMENT = 5_000;

const RECORD_COLUMNS =
  'uid, conv, member, muted, marked_unread, large, last_seq, read_seq, deleted_seq, gen, join_gen, category, mention_seqs, w, read_gen, read_mention_seqs, mentions_only, last_at, nocount_seqs';

interface RecordRow {
  uid: string;
  conv: string;
  member: boolean;
  muted: boolean;
  marked_unread: boolean;
  large: boolean;
  last_seq: string;
  read_seq: string;
  deleted_seq: string;
  gen: string;
  join_gen: string;
  category: string;
  mention_seqs: string[];
  w: string;
  read_gen: string;
  read_mention_seqs: string[];
  mentions_only: boolean;
  last_at: string;
  nocount_seqs: string[];
}

function recordOf(row: RecordRow): StoredConv {
  return {
    conv: row.conv,
    member: row.member,
    muted: row.muted,
    markedUnread: row.marked_unread,
    large: row.large,
    lastSeq: Number(row.last_seq),
    readSeq: Number(row.read_seq),
    deletedSeq: Number(row.deleted_seq),
    gen: Number(row.gen),
    joinGen: Number(row.join_gen),
    category: row.category,
    mentionSeqs: row.mention_seqs.map(Number),
    readGen: Number(row.read_gen),
    readMentionSeqs: row.read_mention_seqs.map(Number),
    // One level: a row is never both (settings set them together, both from the newer row).
    mentionsOnly: row.mentions_only && !row.muted,
    at: Number(row.last_at),
    nocountSeqs: row.nocount_seqs.map(Number),
  };
}

interface Columns {
  uid: string[];
  conv: string[];
  member: boolean[];
  muted: boolean[];
  marked: boolean[];
  large: boolean[];
  lastSeq: number[];
  readSeq: number[];
  deletedSeq: number[];
  gen: number[];
  joinGen: number[];
  category: string[];
  mentions: string[];
  w: number[];
  readGen: number[];
  readMentions: string[];
  mentionsOnly: boolean[];
  at: number[];
  nocount: string[];
}

function emptyColumns(): Columns {
  return {
    uid: [],
    conv: [],
    member: [],
    muted: [],
    marked: [],
    large: [],
    lastSeq: [],
    readSeq: [],
    deletedSeq: [],
    gen: [],
    joinGen: [],
    category: [],
    mentions: [],
    w: [],
    readGen: [],
    readMentions: [],
    mentionsOnly: [],
    at: [],
    nocount: [],
  };
}

function pushRecord(c: Columns, uid: string, r: StoredConv, w: number): void {
  c.uid.push(uid);
  c.conv.push(r.conv);
  c.member.push(r.member);
  c.muted.push(r.muted);
  c.marked.push(r.markedUnread);
  c.large.push(r.large);
  c.lastSeq.push(r.lastSeq);
  c.readSeq.push(r.readSeq);
  c.deletedSeq.push(r.deletedSeq);
  c.gen.push(r.gen);
  c.joinGen.push(r.joinGen);
  c.category.push(r.category);
  c.mentions.push(`{${r.mentionSeqs.join(',')}}`);
  c.w.push(w);
  c.readGen.push(r.readGen);
  c.readMentions.push(`{${r.readMentionSeqs.join(',')}}`);
  c.mentionsOnly.push(r.mentionsOnly);
  c.at.push(r.at);
  c.nocount.push(`{${r.nocountSeqs.join(',')}}`);
}

/**
 * The columns as array literals, built here rather than by pg's generic array serializer, which
 * escapes element by element and was most of a drain chunk's time in Node.
 */
function columnArrays(c: Columns): string[] {
  const bools = (values: readonly boolean[]): string => `{${values.map((b) => (b ? 't' : 'f')).join(',')}}`;
  const numbers = (values: readonly number[]): string => `{${values.join(',')}}`;
  return [
    textArray(c.uid),
    textArray(c.conv),
    bools(c.member),
    bools(c.muted),
    bools(c.marked),
    bools(c.large),
    numbers(c.lastSeq),
    numbers(c.readSeq),
    numbers(c.deletedSeq),
    numbers(c.gen),
    numbers(c.joinGen),
    textArray(c.category),
    textArray(c.mentions),
    numbers(c.w),
    numbers(c.readGen),
    textArray(c.readMentions),
    bools(c.mentionsOnly),
    numbers(c.at),
    textArray(c.nocount),
  ];
}

const NEEDS_ESCAPE = /["\\]/;

/** A text[] literal: every element quoted (an unquoted NULL would be a null), quotes and backslashes escaped. */
function textArray(values: readonly string[]): string {
  // Ids hold neither quotes nor backslashes: then two native joins build it, no string per element.
  if (!NEEDS_ESCAPE.test(values.join(''))) return values.length === 0 ? '{}' : `{"${values.join('","')}"}`;
  return `{${values.map((v) => `"${NEEDS_ESCAPE.test(v) ? v.replace(/["\\]/g, '\\$&') : v}"`).join(',')}}`;
}

/**
 * Whole-row columns come from the row read at the larger write clock; the registers that only
 * ever rise merge; the read register by its generation, then the clock (byReadGen).
 */
const newer = (column: string): string => `${column} = CASE WHEN EXCLUDED.w >= t.w THEN EXCLUDED.${column} ELSE t.${column} END`;

/**
 * The read register (readGen, readSeq) and the mention lists it partitions, from one row: the
 * newer read generation's (an "unread from here" sets readSeq, maybe lower), within one
 * generation the row read at the larger write clock (readSeq rises with reads; an operator's
 * rebase lowers it and raises the clock).
 */
const byReadGen = (column: string): string =>
  `${column} = CASE WHEN EXCLUDED.read_gen > t.read_gen THEN EXCLUDED.${column} WHEN EXCLUDED.read_gen < t.read_gen THEN t.${column} WHEN EXCLUDED.w >= t.w THEN EXCLUDED.${column} ELSE t.${column} END`;

/** A register that only rises within one membership: the newer membership's value, else the larger. */
const byJoin = (column: string): string =>
  `CASE WHEN EXCLUDED.join_gen > t.join_gen THEN EXCLUDED.${column} WHEN EXCLUDED.join_gen < t.join_gen THEN t.${column} ELSE GREATEST(t.${column}, EXCLUDED.${column}) END`;

/**
 * A conversation's head, as read at generation `gen` (an SQL expression): a head read at a newer
 * generation wins, one read at an older is dropped, at the same the larger (the head only rises
 * within a generation; a rebase lowers it under a new one).
 */
const headAt = (maxSeq: string, gen: string): string =>
  `max_seq = CASE WHEN ${gen} > t.head_gen THEN ${maxSeq} WHEN ${gen} < t.head_gen THEN t.max_seq ELSE GREATEST(t.max_seq, ${maxSeq}) END,
    head_gen = GREATEST(t.head_gen, ${gen})`;

// One statement for a whole batch: arrays unnested into rows (one round trip, one plan).
const UPSERT_RECORDS = `
  INSERT INTO redpoint_user_conv AS t (${RECORD_COLUMNS})
  -- mention seqs travel as array literals, one text per row (unnest would flatten a 2-D array)
  SELECT u.uid, u.conv, u.member, u.muted, u.marked_unread, u.large, u.last_seq, u.read_seq, u.deleted_seq, u.gen, u.join_gen,
         u.category, u.mentions::bigint[], u.w, u.read_gen, u.read_mentions::bigint[], u.mentions_only, u.last_at, u.nocount::bigint[]
  FROM unnest($1::text[], $2::text[], $3::bool[], $4::bool[], $5::bool[], $6::bool[], $7::bigint[], $8::bigint[],
              $9::bigint[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::bigint[], $15::bigint[], $16::text[],
              $17::bool[], $18::bigint[], $19::text[])
    AS u(uid, conv, member, muted, marked_unread, large, last_seq, read_seq, deleted_seq, gen, join_gen, category, mentions, w,
         read_gen, read_mentions, mentions_only, last_at, nocount)
  -- a state read before the user was erased is not written back (a user created again is newer)
  WHERE NOT EXISTS (SELECT 1 FROM redpoint_erased e WHERE e.uid = u.uid AND e.w >= u.w)
  ON CONFLICT (uid, conv) DO UPDATE SET
    -- lastSeq and deletedSeq are max-registers within one membership: a new join (join_gen)
    -- starts them over, and an operator's rebase is a new membership that lowers lastSeq
    last_seq = ${byJoin('last_seq')},
    deleted_seq = ${byJoin('deleted_seq')},
    gen = GREATEST(t.gen, EXCLUDED.gen),
    -- the read register by its generation first (byReadGen)
    ${['read_seq', 'mention_seqs', 'read_mention_seqs', 'read_gen'].map(byReadGen).join(',\n    ')},
    ${['member', 'muted', 'marked_unread', 'large', 'join_gen', 'category', 'mentions_only', 'nocount_seqs'].map(newer).join(',\n    ')},
    -- the last activity: a max-register (issue 43)
    last_at = GREATEST(t.last_at, EXCLUDED.last_at),
    w = GREATEST(t.w, EXCLUDED.w),
    updated_at = now()`;

/** Code-unit order of ids: every writer sorts its rows by it, so they lock shared rows in one order. */
const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The advisory lock class of a conversation's roster writes and its deletion (the second key: the id's hash). */
const CONVERSATION_LOCK = 7_270_415;
const DEADLOCK_DETECTED = '40P01';
const DEADLOCK_ATTEMPTS = 3;

/**
 * Runs `write` (all or nothing: one statement, or one transaction) again when PostgreSQL chose
 * it as a deadlock's victim, which rolled it back whole; every write here is idempotent.
 */
async function againIfDeadlocked<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (attempt >= DEADLOCK_ATTEMPTS || (err as { code?: unknown }).code !== DEADLOCK_DETECTED) throw err;
    }
  }
}

/** A conversation row (as `c`) not at or below its deletion's tombstone: anything else is a write that raced the deletion. */
const NOT_DELETED = 'NOT EXISTS (SELECT 1 FROM redpoint_deleted_conversations d WHERE d.conv = c.conv AND d.gen >= c.gen)';

const DELETE_RECORDS = `
  DELETE FROM redpoint_user_conv t
  USING unnest($1::text[], $2::text[], $3::bigint[]) AS d(uid, conv, w)
  WHERE t.uid = d.uid AND t.conv = d.conv AND t.w <= d.w`;

const UPSERT_HEADS = `
  INSERT INTO redpoint_conversations AS t (conv, max_seq, large, category, gen, head_gen, last_at, mention_all, nocount_seqs)
  SELECT conv, max_seq, false, 'default', 0, head_gen, last_at, mention_all::bigint[], nocount_seqs::bigint[]
  FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[]) AS h(conv, max_seq, head_gen, last_at, mention_all, nocount_seqs)
  ON CONFLICT (conv) DO UPDATE SET ${headAt('EXCLUDED.max_seq', 'EXCLUDED.head_gen')},
    -- issue 43: the last activity a max-register, the @all seqs a union (the newest 1000)
    last_at = GREATEST(t.last_at, EXCLUDED.last_at),
    mention_all = CASE WHEN cardinality(EXCLUDED.mention_all) = 0 THEN t.mention_all ELSE
      (SELECT coalesce(array_agg(s ORDER BY s), '{}') FROM (SELECT DISTINCT unnest(t.mention_all || EXCLUDED.mention_all) AS s ORDER BY s DESC LIMIT 1000) AS u) END,
    -- the non-counting seqs a union too (the newest 1000, kept in either mode: conv_record.lua '#N')
    nocount_seqs = CASE WHEN cardinality(EXCLUDED.nocount_seqs) = 0 THEN t.nocount_seqs ELSE
      (SELECT coalesce(array_agg(s ORDER BY s), '{}') FROM (SELECT DISTINCT unnest(t.nocount_seqs || EXCLUDED.nocount_seqs) AS s ORDER BY s DESC LIMIT 1000) AS u) END,
    updated_at = now()`;

/** A conversation write that lowers the head under a newer generation: an operator's rebase. */
const REBASED = 'EXCLUDED.gen > t.head_gen AND EXCLUDED.max_seq < t.max_seq';
const atOrBelowHead = (seqs: string): string => `array(SELECT s FROM unnest(${seqs}) AS s WHERE s <= EXCLUDED.max_seq ORDER BY s)`;

const UPSERT_CONVERSATIONS = `
  INSERT INTO redpoint_conversations AS t (conv, max_seq, large, category, gen, rewrite_gen, large_from, parent_gen, head_gen)
  SELECT c.*, c.gen FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[])
    AS c(conv, max_seq, large, category, gen, rewrite_gen, large_from, parent_gen)
  ON CONFLICT (conv) DO UPDATE SET
    ${headAt('EXCLUDED.max_seq', 'EXCLUDED.gen')}, large = EXCLUDED.large, category = EXCLUDED.category,
    gen = EXCLUDED.gen, rewrite_gen = EXCLUDED.rewrite_gen,
    -- issue 43: a write-diffused conversation keeps no @all seqs (a switch to write diffusion drops
    -- them); an operator's rebase (the one write of a newer generation with a lower head) forgets
    -- those and the non-counting seqs above the new head (conv_rebase.lua)
    mention_all = CASE WHEN NOT EXCLUDED.large THEN '{}'::bigint[] WHEN ${REBASED} THEN ${atOrBelowHead('t.mention_all')} ELSE t.mention_all END,
    nocount_seqs = CASE WHEN ${REBASED} THEN ${atOrBelowHead('t.nocount_seqs')} ELSE t.nocount_seqs END,
    large_from = EXCLUDED.large_from,
    -- a topic's child: '#P' rises without a new generation (a sync that brings the child's own
    -- roster), so two drainers may write one generation with different values: the larger wins
    parent_gen = GREATEST(t.parent_gen, EXCLUDED.parent_gen),
    updated_at = now()`;

/** Members of the conversations $1 that are not among the (conv, uid) pairs $2, $3. */
const DELETE_FORMER_MEMBERS = `
  DELETE FROM redpoint_conv_members AS t WHERE t.conv = ANY($1::text[])
  AND NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) AS k(conv, uid) WHERE k.conv = t.conv AND k.uid = t.uid)`;

const UPSERT_MEMBERS = `
  INSERT INTO redpoint_conv_members AS t (conv, uid, join_gen, join_head)
  SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS m(conv, uid, join_gen, join_head)
  ON CONFLICT (conv, uid) DO UPDATE SET join_gen = EXCLUDED.join_gen, join_head = EXCLUDED.join_head`;
