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

  async saveSharing(uid: string, share: boolean): Promise<void> {
    await this.pool.query(
      `INSERT INTO redpoint_user_settings (uid, share_reads) VALUES ($1, $2)
       ON CONFLICT (uid) DO UPDATE SET share_reads = EXCLUDED.share_reads, updated_at = now()`,
      [uid, share],
    );
  }

  async loadSharing(uids: readonly string[]): Promise<Map<string, boolean>> {
    if (uids.length === 0) return new Map();
    const { rows } = await this.pool.query<{ uid: string; share_reads: boolean }>(
      'SELECT uid, share_reads FROM redpoint_user_settings WHERE uid = ANY($1::text[])',
      [uids],
    );
    return new Map(rows.map((r) => [r.uid, r.share_reads]));
  }

  async saveMutedMentions(uid: string, on: boolean): Promise<void> {
    await this.pool.query(
      `INSERT INTO redpoint_user_settings (uid, muted_mentions) VALUES ($1, $2)
       ON CONFLICT (uid) DO UPDATE SET muted_mentions = EXCLUDED.muted_mentions, updated_at = now()`,
      [uid, on],
    );
  }

  async loadMutedMentions(uids: readonly string[]): Promise<Map<string, boolean>> {
    if (uids.length === 0) return new Map();
    const { rows } = await this.pool.query<{ uid: string; muted_mentions: boolean }>(
      'SELECT uid, muted_mentions FROM redpoint_user_settings WHERE uid = ANY($1::text[])',
      [uids],
    );
    return new Map(rows.map((r) => [r.uid, r.muted_mentions]));
  }
}
