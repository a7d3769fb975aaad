import type { RedpointClient } from '@redpoint/client';
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
function toMessageInput(conv: string, seq: number, m: Outgoing, uid: string, now: number): MessageInput {
  const input: MessageInput = { conv, seq, sender: m.sender, at: Math.round(now - m.agoMs) };
  if (m.kind === 'reaction') return { ...input, counts: false };
  if (m.kind === 'recall') return { ...input, counts: false, ...(m.recalls !== undefined ? { recalls: [m.recalls] } : {}) };
  if (m.kind === 'all') return { ...input, mentionAll: true };
  return m.mention ? { ...input, mentions: [uid] } : input;
}

/** Sends to Redpoint with the next seqs of a conversation, then tells the dev entry what was sent (Redpoint keeps no text). */
export class Outbox {
  /** Next seq per conversation: the client's newest known, or what this page sent last. */
  private readonly sent = new Map<string, number>();

  constructor(
    private readonly client: RedpointClient,
    private readonly uid: string,
    private readonly activity: Activity,
  ) {}

  async send(conv: string, outgoing: Outgoing[]): Promise<void> {
    const numbered = outgoing.map((m) => ({ ...m, seq: this.nextSeq(conv) }));
    // `at`: the message's time as a message service would stamp it (issue 43: Redpoint keeps the
    // conversation's last activity, so every device orders the list alike).
    const now = Date.now();
    await sendMessages(numbered.map((m) => toMessageInput(conv, m.seq, m, this.uid, now)));
    await this.activity.sent(conv, numbered);
  }

  private nextSeq(conv: string): number {
    const seq = Math.max(this.client.lastSeq(conv), this.sent.get(conv) ?? 0) + 1;
    this.sent.set(conv, seq);
    return seq;
  }
}
