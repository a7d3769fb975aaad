import type pg from 'pg';
import type { TopicsBacking } from '../engine/durable-backing.js';

/** The topic registries (schema.ts migration 10): one row per (conversation, topic), added, and dropped only with the conversation (the operator's delete). */
export class PgTopics implements TopicsBacking {
  constructor(private readonly pool: pg.Pool) {}

  async saveTopic(conv: string, topic: string): Promise<void> {
    await this.pool.query('INSERT INTO redpoint_topics (conv, topic) VALUES ($1, $2) ON CONFLICT DO NOTHING', [conv, topic]);
  }

  async dropTopics(conv: string): Promise<void> {
    await this.pool.query('DELETE FROM redpoint_topics WHERE conv = $1', [conv]);
  }

  async loadTopics(convs: readonly string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    if (convs.length === 0) return out;
    const { rows } = await this.pool.query<{ conv: string; topic: string }>('SELECT conv, topic FROM redpoint_topics WHERE conv = ANY($1::text[])', [convs]);
    for (const { conv, topic } of rows) {
      let topics = out.get(conv);
      if (!topics) out.set(conv, (topics = []));
      topics.push(topic);
    }
    return out;
  }
}
