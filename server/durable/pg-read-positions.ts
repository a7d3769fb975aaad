import type pg from 'pg';
import type { ReadPositionsBacking, StoredSetting } from '../engine/durable-backing.js';

/** Read receipts' tables (schema.ts migration 5): positions as max-registers, and the sharing setting. */
export class PgReadPositions implements ReadPositionsBacking {
  constructor(private readonly pool: pg.Pool) {}

  async savePositions(items: ReadonlyArray<{ conv: string; uid: string; seq: number }>): Promise<void> {
    if (items.length === 0) return;
    await this.pool.query(
      `INSERT INTO redpoint_read_positions (conv, uid, seq)
       SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
       ON CONFLICT (conv, uid) DO UPDATE SET seq = GREATEST(redpoint_read_positions.seq, EXCLUDED.seq)`,
      [items.map((i) => i.conv), items.map((i) => i.uid), items.map((i) => i.seq)],
    );
  }

  async deletePositions(uid: string, convs: readonly string[]): Promise<void> {
    if (convs.length === 0) return;
    await this.pool.query('DELETE FROM redpoint_read_positions WHERE uid = $1 AND conv = ANY($2::text[])', [uid, convs]);
  }

  async loadPositions(convs: readonly string[]): Promise<Array<{ conv: string; uid: string; seq: number }>> {
    if (convs.length === 0) return [];
    const { rows } = await this.pool.query<{ conv: string; uid: string; seq: string }>(
      'SELECT conv, uid, seq FROM redpoint_read_positions WHERE conv = ANY($1::text[])',
      [convs],
    );
    return rows.map((r) => ({ conv: r.conv, uid: r.uid, seq: Number(r.seq) }));
  }

  saveSharing(uid: string, share: boolean): Promise<number> {
    return this.saveSetting('share_reads', uid, share);
  }

  loadSharing(uids: readonly string[]): Promise<Map<string, StoredSetting>> {
    return this.loadSetting('share_reads', uids);
  }

  saveMutedMentions(uid: string, on: boolean): Promise<number> {
    return this.saveSetting('muted_mentions', uid, on);
  }

  loadMutedMentions(uids: readonly string[]): Promise<Map<string, StoredSetting>> {
    return this.loadSetting('muted_mentions', uids);
  }

  /**
   * One column of a user's row (the others keep their defaults, or what they held), and the
   * row's revision after it (schema.ts migration 14): the row lock orders two writers, and the
   * revisions follow that order.
   */
  private async saveSetting(column: UserSettingColumn, uid: string, value: boolean): Promise<number> {
    const { rows } = await this.pool.query<{ rev: string }>(
      `INSERT INTO redpoint_user_settings (uid, ${column}, rev) VALUES ($1, $2, 1)
       ON CONFLICT (uid) DO UPDATE SET ${column} = EXCLUDED.${column}, rev = redpoint_user_settings.rev + 1, updated_at = now()
       RETURNING rev`,
      [uid, value],
    );
    return Number(rows[0]?.rev);
  }

  /** The users who have a row: a user without one has every setting at its default. */
  private async loadSetting(column: UserSettingColumn, uids: readonly string[]): Promise<Map<string, StoredSetting>> {
    if (uids.length === 0) return new Map();
    const { rows } = await this.pool.query<{ uid: string; value: boolean; rev: string }>(
      `SELECT uid, ${column} AS value, rev FROM redpoint_user_settings WHERE uid = ANY($1::text[])`,
      [uids],
    );
    return new Map(rows.map((r) => [r.uid, { value: r.value, rev: Number(r.rev) }]));
  }
}

/** The boolean columns of redpoint_user_settings (schema.ts migrations 7 and 12): interpolated into SQL, so a closed set. */
type UserSettingColumn = 'share_reads' | 'muted_mentions';
