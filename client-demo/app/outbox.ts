import type { RedpointClient } from '@redpoint/client';
import { messageConv } from '../../protocol/child-id.js';
import type { DemoKeptMessage } from '../../protocol/replies.js';
import type { MessageInput } from '../../protocol/schemas.js';
import type { Activity } from './activity.js';
import { sendMessages } from './api.js';

/** A message the page sends as the message service would (the test tools, a reaction, a recall). */
export interface Outgoing {
  sender: string;
  text: string;
  /** It @-mentions the page's user. */
  mention: boolean;
  agoMs: number;
  /** Absent: a plain message. */
  kind?: DemoKeptMessage['kind'];
  /** For a recall: the seq it recalls. */
  recalls?: number;
}

/**
 * What the message service would report to Redpoint for each kind (PROTOCOL.md "What counts"):
 * a reaction and a recall's own notice do not count (`counts: false`: they move the last
 * activity, not the unread), a recall names the seq it takes back, @all mentions every member.
 */
function toMessageInput(to: Target, seq: number, m: Outgoing, uid: string, now: number): MessageInput {
  const input: MessageInput = {
    conv: to.conv,
    ...(to.topic !== undefined ? { topic: to.topic } : {}),
    ...(to.thread !== undefined ? { thread: to.thread } : {}),
    ...(to.rootSender !== undefined ? { rootSender: to.rootSender } : {}),
    seq,
    sender: m.sender,
    at: Math.round(now - m.agoMs),
  };
  if (m.kind === 'reaction') return { ...input, counts: false };
  if (m.kind === 'recall') return { ...input, counts: false, ...(m.recalls !== undefined ? { recalls: [m.recalls] } : {}) };
  if (m.kind === 'all') return { ...input, mentionAll: true };
  return m.mention ? { ...input, mentions: [uid] } : input;
}

/**
 * Where a message goes: a conversation, one of its topics (PROTOCOL.md "Topics": a topic's
 * messages name it in `topic`) or a thread of it (PROTOCOL.md "Threads": a reply names its root
 * message's seq in `thread`, and the root's sender in `rootSender`, who then follows it).
 */
export interface Target {
  conv: string;
  topic?: string;
  thread?: number;
  rootSender?: string;
}

/** The target of a row: a topic's or a thread's row names its conversation and topic or root. */
export const targetOf = (row: { conv: string; parent?: string; topic?: string; thread?: number }): Target => {
  if (row.parent === undefined) return { conv: row.conv };
  if (row.topic !== undefined) return { conv: row.parent, topic: row.topic };
  if (row.thread !== undefined) return { conv: row.parent, thread: row.thread };
  return { conv: row.conv };
};

/**
 * Sends to Redpoint with the next seqs of a conversation or topic (each topic has its own seqs),
 * then tells the dev entry what was sent (Redpoint keeps no text), under the row's id.
 */
export class Outbox {
  /** Next seq per conversation: the client's newest known, or what this page sent last. */
  private readonly sent = new Map<string, number>();

  constructor(
    private readonly client: RedpointClient,
    private readonly uid: string,
    private readonly activity: Activity,
  ) {}

  /** Sends `outgoing` in one request; resolves with the seq each got, in order. */
  async send(to: Target, outgoing: Outgoing[]): Promise<number[]> {
    const conv = messageConv(to);
    const numbered = outgoing.map((m) => ({ ...m, seq: this.nextSeq(conv) }));
    // `at`: the message's time as a message service would stamp it (issue 43: Redpoint keeps the
    // conversation's last activity, so every device orders the list alike).
    const now = Date.now();
    await sendMessages(numbered.map((m) => toMessageInput(to, m.seq, m, this.uid, now)));
    await this.activity.sent(conv, numbered);
    return numbered.map((m) => m.seq);
  }

  /**
   * Numbers each row of `heads` from its head on, even before the client has heard of the row:
   * other pages send to the same conversations (a seed of theirs), and a seq sent again is a
   * duplicate the server ignores.
   */
  continueFrom(heads: ReadonlyMap<string, number>): void {
    for (const [conv, head] of heads) this.sent.set(conv, Math.max(this.sent.get(conv) ?? 0, head));
  }

  /** `conv`: the row's id (a topic's `<conv>#t:<topic>`), whose seqs the client knows. */
  private nextSeq(conv: string): number {
    const seq = Math.max(this.client.lastSeq(conv), this.sent.get(conv) ?? 0) + 1;
    this.sent.set(conv, seq);
    return seq;
  }
}
