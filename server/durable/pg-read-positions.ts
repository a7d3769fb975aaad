import type pg from 'pg';
import type { ReadPositionsBacking } from '../engine/durable-backing.js';

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

  saveSharing(uid: string, share: boolean): Promise<void> {
    return this.saveSetting('share_reads', uid, share);
  }

  loadSharing(uids: readonly string[]): Promise<Map<string, boolean>> {
    return this.loadSetting('share_reads', uids);
  }

  saveMutedMentions(uid: string, on: boolean): Promise<void> {
    return this.saveSetting('muted_mentions', uid, on);
  }

  loadMutedMentions(uids: readonly string[]): Promise<Map<string, boolean>> {
    return this.loadSetting('muted_mentions', uids);
  }

  /** One column of a user's row; the others keep their defaults (or what they held). */
  private async saveSetting(column: UserSettingColumn, uid: string, value: boolean): Promise<void> {
    await this.pool.query(
      `INSERT INTO redpoint_user_settings (uid, ${column}) VALUES ($1, $2)
       ON CONFLICT (uid) DO UPDATE SET ${column} = EXCLUDED.${column}, updated_at = now()`,
      [uid, value],
    );
  }

  /** The users who have a row: a user without one has every setting at its default. */
  private async loadSetting(column: UserSettingColumn, uids: readonly string[]): Promise<Map<string, boolean>> {
    if (uids.length === 0) return new Map();
    const { rows } = await this.pool.query<{ uid: string; value: boolean }>(
      `SELECT uid, ${column} AS value FROM redpoint_user_settings WHERE uid = ANY($1::text[])`,
      [uids],
    );
    return new Map(rows.map((r) => [r.uid, r.value]));
  }
}

/** The boolean columns of redpoint_user_settings (schema.ts migrations 7 and 12): interpolated into SQL, so a closed set. */
type UserSettingColumn = 'share_reads' | 'muted_mentions';
