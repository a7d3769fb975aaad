/**
 * Child conversations (PROTOCOL.md "Topics", "Threads"): a topic `(conv, topic)` is the
 * conversation `<conv>#t:<topic>`, a thread `(conv, root)` the conversation `<conv>#r:<root>`
 * (root: the root message's seq in the conversation). `#` is outside ID_PATTERN, so no id the
 * message service names is ever a child, and the first `#` splits a child id unambiguously. This
 * is the one place that builds and reads such ids; everything else asks here.
 */
const TOPIC_MARK = '#t:';
/** Exported for the Lua scripts' generated header (scripts.ts): a thread row's default level is decided from its id there too. */
export const THREAD_MARK = '#r:';

export function topicConv(conv: string, topic: string): string {
  return conv + TOPIC_MARK + topic;
}

export function threadConv(conv: string, root: number): string {
  return conv + THREAD_MARK + String(root);
}

/** The parent and topic of a topic's id; null for any other id (a plain conversation, a thread). */
export function parseChild(id: string): { parent: string; topic: string } | null {
  const at = id.indexOf(TOPIC_MARK);
  if (at <= 0) return null;
  return { parent: id.slice(0, at), topic: id.slice(at + TOPIC_MARK.length) };
}

/** The parent and root of a thread's id; null for any other id. */
function parseThread(id: string): { parent: string; root: number } | null {
  const at = id.indexOf(THREAD_MARK);
  if (at <= 0) return null;
  const root = Number(id.slice(at + THREAD_MARK.length));
  return Number.isSafeInteger(root) && root > 0 ? { parent: id.slice(0, at), root } : null;
}

/** Whether `id` names a thread (rules.ts: its row's default level is `mentions`). */
export function isThreadConv(id: string): boolean {
  return id.indexOf(THREAD_MARK) > 0;
}

/** Whether `id` names a child conversation (a topic or a thread). */
export function isChildConv(id: string): boolean {
  return id.indexOf('#') > 0;
}

/** The prefix of every thread id of `conv`: a user's thread rows of it are their rows starting with it. */
export function threadPrefix(conv: string): string {
  return conv + THREAD_MARK;
}

/** Adds a child's `parent` and `topic` or `thread` to its row (ConvState, ConvView), in place: every row of a child carries them, derived here only. */
export function withChildFields<T extends { conv: string; parent?: string; topic?: string; thread?: number }>(row: T): T {
  if (row.conv.indexOf('#') < 0) return row;
  const child = parseChild(row.conv);
  if (child) {
    row.parent = child.parent;
    row.topic = child.topic;
    return row;
  }
  const thread = parseThread(row.conv);
  if (thread) {
    row.parent = thread.parent;
    row.thread = thread.root;
  }
  return row;
}

/** The engine conversation a message lands in: its thread's or topic's child when it names one. */
export function messageConv(m: { conv: string; topic?: string; thread?: number }): string {
  if (m.thread !== undefined) return threadConv(m.conv, m.thread);
  return m.topic === undefined ? m.conv : topicConv(m.conv, m.topic);
}
