import type pg from 'pg';

/**
 * The durable tier's schema, as versioned migrations applied in order at start (each in its own
 * transaction, under an advisory lock so several processes starting at once apply it once).
 * A database whose schema is newer than this code knows is refused: an older binary must not
 * write rows a newer one laid out differently.
 *
 * Registers, not counts: every row holds the max-registers and flags Redis holds, so an upsert
 * can merge (GREATEST) and a replayed or late write cannot move anything back. Tables are keyed
 * by their distribution column first: `uid` for per-user rows, `conv` for per-conversation rows
 * (Citus: `create_distributed_table('redpoint_user_conv', 'uid')`, and the two conversation
 * tables by `conv`, colocated with each other).
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE redpoint_user_conv (
     uid text NOT NULL,
     conv text NOT NULL,
     member boolean NOT NULL,
     muted boolean NOT NULL,
     marked_unread boolean NOT NULL,
     large boolean NOT NULL,
     last_seq bigint NOT NULL,
     read_seq bigint NOT NULL,
     deleted_seq bigint NOT NULL,
     gen bigint NOT NULL,
     join_gen bigint NOT NULL,
     category text NOT NULL,
     mention_seqs bigint[] NOT NULL,
     w bigint NOT NULL,
     updated_at timestamptz NOT NULL DEFAULT now(),
     PRIMARY KEY (uid, conv)
   );
   CREATE TABLE redpoint_conversations (
     conv text PRIMARY KEY,
     max_seq bigint NOT NULL,
     large boolean NOT NULL,
     category text NOT NULL,
     gen bigint NOT NULL,
     rewrite_gen bigint,
     updated_at timestamptz NOT NULL DEFAULT now()
   );
   CREATE TABLE redpoint_conv_members (
     conv text NOT NULL,
     uid text NOT NULL,
     join_gen bigint NOT NULL,
     join_head bigint NOT NULL,
     PRIMARY KEY (conv, uid)
   );`,
  // 2: erased users' tombstones. A drain pass that read a user before the erase and writes after
  // it must not bring the rows back: an upsert below the tombstone's write clock is dropped.
  `CREATE TABLE redpoint_erased (
     uid text PRIMARY KEY,
     w bigint NOT NULL,
     erased_at timestamptz NOT NULL DEFAULT now()
   );`,
  // 3: deleted conversations' tombstones, at the deletion's generation (conv_delete.lua: above
  // every generation the conversation gave, below every one a re-creation gives). A roster read
  // before the deletion and written after it is older and is dropped; rows that still slip in
  // (a head raised at the same moment) are not restored.
  `CREATE TABLE redpoint_deleted_conversations (
     conv text PRIMARY KEY,
     gen bigint NOT NULL,
     deleted_at timestamptz NOT NULL DEFAULT now()
   );`,
  // 4: the generation a conversation's stored head was read at. Heads merge by (head_gen,
  // max_seq), not by max_seq alone: an operator's rebase (admin/rebase.ts) lowers a head under a
  // newer generation, and a head read before it must not raise it back. Existing rows were read
  // at their roster's generation at least.
  `ALTER TABLE redpoint_conversations ADD COLUMN head_gen bigint NOT NULL DEFAULT 0;
   UPDATE redpoint_conversations SET head_gen = gen;`,
  // 5: the read register's generation (rules.ts readGen: raised by each "unread from here") and
  // the mentions a read spent (readMentionSeqs), which such an act may count again. Rows merge
  // their read register by read_gen first (pg-store.ts byReadGen). Existing rows: generation 0.
  `ALTER TABLE redpoint_user_conv ADD COLUMN read_gen bigint NOT NULL DEFAULT 0,
     ADD COLUMN read_mention_seqs bigint[] NOT NULL DEFAULT '{}';`,
  // 6 (issue 43): the notification level "mentions only" (rules.ts mentionsOnly; 'none' stays
  // `muted`), taken with the other settings from the newer row, and the last activity `at` (ms,
  // 0 = unknown), a max-register (GREATEST). Existing rows: level all or none, activity unknown.
  // A conversation's last activity and a read-diffused one's @all seqs (engine.ts HeadExtra),
  // written with its head: last_at by GREATEST, mention_all as the union's newest 1000 (emptied by
  // a whole write of a write-diffused state: a switch to write diffusion drops them); large_from,
  // the head when it became read-diffused (conv_members.lua '#L'), with the whole state.
  `ALTER TABLE redpoint_user_conv ADD COLUMN mentions_only boolean NOT NULL DEFAULT false,
     ADD COLUMN last_at bigint NOT NULL DEFAULT 0;
   ALTER TABLE redpoint_conversations ADD COLUMN last_at bigint NOT NULL DEFAULT 0,
     ADD COLUMN mention_all bigint[] NOT NULL DEFAULT '{}',
     ADD COLUMN large_from bigint NOT NULL DEFAULT 0;`,
  // 7: read receipts (issue 44): each sharing member's "has seen up to" per conversation (a
  // max-register: upserts take GREATEST; keyed by conv first, colocated with the conversation
  // tables), and each user's shareReads setting (a user who does not share has no rows in the first).
  `CREATE TABLE redpoint_read_positions (
     conv text NOT NULL,
     uid text NOT NULL,
     seq bigint NOT NULL,
     PRIMARY KEY (conv, uid)
   );
   CREATE TABLE redpoint_user_settings (
     uid text PRIMARY KEY,
     share_reads boolean NOT NULL,
     updated_at timestamptz NOT NULL DEFAULT now()
   );`,
  // 8 (issue 43, what counts): a record's non-counting seqs (rules.ts nocountSeqs: `counts:
  // false` messages and recalls), taken with the row at the larger write clock (the set only
  // grows within a membership; a leave or delete trims it, and that write is the newer one).
  `ALTER TABLE redpoint_user_conv ADD COLUMN nocount_seqs bigint[] NOT NULL DEFAULT '{}';`,
  // 9 (issue 43, what counts in read-diffused conversations): a conversation's non-counting seqs
  // (conv_record.lua '#N', kept in either mode), written with its head as a union (the newest
  // 1000, LIMITS.nocountSeqsPerConversation), restored with the conversation. Existing rows: none.
  `ALTER TABLE redpoint_conversations ADD COLUMN nocount_seqs bigint[] NOT NULL DEFAULT '{}';`,
  // 10 (topics, PROTOCOL.md "Topics"): each conversation's topic registry, written through when a
  // topic is added (before its child conversation is created) and put back with the conversation
  // (conv_restore.lua). Keyed by conv first, colocated with the conversation. Self-contained: it
  // touches no other table.
  `CREATE TABLE redpoint_topics (
     conv text NOT NULL,
     topic text NOT NULL,
     PRIMARY KEY (conv, topic)
   );`,
  // 11 (topics): a topic's child conversation keeps the parent generation of the newest roster
  // synced into it (conv_members.lua '#P'), written with its roster as a max-register (GREATEST:
  // it only rises in a child's life, and the parent's generations rise across its re-creation)
  // and put back by conv_restore.lua. Without it a child back from PostgreSQL applied whatever
  // roster came next, an older one too. Existing rows: 0, none (as before).
  `ALTER TABLE redpoint_conversations ADD COLUMN parent_gen bigint NOT NULL DEFAULT 0;`,
  // 12 (issue 43, mentions in muted conversations): each user's mutedMentions setting, beside
  // shareReads (a row written for it alone keeps shareReads at its default, true). Additive.
  `ALTER TABLE redpoint_user_settings ADD COLUMN muted_mentions boolean NOT NULL DEFAULT false,
     ALTER COLUMN share_reads SET DEFAULT true;`,
  // 13 (threads, PROTOCOL.md "Threads"): each conversation's thread registry, the roots of its
  // threads, written through when a thread is registered (before its child is made) and put back
  // with the conversation (conv_restore.lua), as topics' (10): a category change and the
  // operator's delete reach a thread nobody follows after Redis lost it. Self-contained.
  `CREATE TABLE redpoint_threads (
     conv text NOT NULL,
     root bigint NOT NULL,
     PRIMARY KEY (conv, root)
   );`,
  // 14 (settings written by two processes at once): each write of a user's settings row raises
  // its revision, and Redis keeps a setting with the revision it came from (setting-text.ts),
  // taking only a newer one: the process whose PostgreSQL write came last also has the last
  // word in Redis, whichever reaches Redis first. Existing rows: 0, older than any write.
  `ALTER TABLE redpoint_user_settings ADD COLUMN rev bigint NOT NULL DEFAULT 0;`,
];

const SCHEMA_VERSION = MIGRATIONS.length;

/** An arbitrary constant: the advisory lock key of Redpoint's migrations. */
const MIGRATION_LOCK = 7_270_415_001;

class SchemaTooNewError extends Error {
  override name = 'SchemaTooNewError';
}

/** Creates or migrates the schema; returns the version found before. */
export async function migrate(pool: pg.Pool): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS redpoint_schema (id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)');
    const { rows } = await client.query<{ version: number }>('SELECT version FROM redpoint_schema WHERE id = 1');
    const found = rows[0]?.version ?? 0;
    if (found > SCHEMA_VERSION) {
      throw new SchemaTooNewError(
        `the database's Redpoint schema is version ${found}, newer than this build knows (${SCHEMA_VERSION}): run a Redpoint at least as new as the one that migrated it`,
      );
    }
    for (let version = found + 1; version <= SCHEMA_VERSION; version++) {
      await client.query('BEGIN');
      try {
        await client.query(MIGRATIONS[version - 1] as string);
        await client.query('INSERT INTO redpoint_schema (id, version) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version', [version]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    }
    return found;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    client.release();
  }
}
