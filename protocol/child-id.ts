/**
 * Child conversations (PROTOCOL.md "Topics"): a topic `(conv, topic)` is the conversation
 * `<conv>#t:<topic>`. `#` is outside ID_PATTERN, so no id the message service names is ever a
 * child, and the first `#` splits a child id unambiguously. This is the one place that builds
 * and reads such ids; everything else asks here.
 */
const TOPIC_MARK = '#t:';

export function topicConv(conv: string, topic: string): string {
  return conv + TOPIC_MARK + topic;
}

/** The parent and topic of a child id; null for a plain conversation id. */
export function parseChild(id: string): { parent: string; topic: string } | null {
  const at = id.indexOf(TOPIC_MARK);
  if (at <= 0) return null;
  return { parent: id.slice(0, at), topic: id.slice(at + TOPIC_MARK.length) };
}

/** Adds a child's `parent` and `topic` to its row (ConvState, ConvView), in place: every row of a child carries them, derived here only. */
export function withChildFields<T extends { conv: string; parent?: string; topic?: string }>(row: T): T {
  if (row.conv.indexOf('#') < 0) return row;
  const child = parseChild(row.conv);
  if (child) {
    row.parent = child.parent;
    row.topic = child.topic;
  }
  return row;
}

/** The engine conversation a message lands in: its topic's child when it names one. */
export function messageConv(m: { conv: string; topic?: string }): string {
  return m.topic === undefined ? m.conv : topicConv(m.conv, m.topic);
}
