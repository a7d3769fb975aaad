import type { ConversationGroup, ConversationView, RedpointState } from '@redpoint/client';
import type { DemoActivityReply, DemoKeptMessage } from '../../protocol/replies.js';
import { getActivity, reportActivity } from './api.js';

/**
 * The chat list's order and the conversation's messages, from the dev entry's shared record
 * (client-demo/demo-activity.ts). Redpoint keeps counts, not message times or texts: a device
 * reports when it sees a conversation's lastSeq rise, the test tools report what they sent and
 * when, and every device sorts by the same stamps (then by id). Until the server carries a
 * message time (`at`), a time is when a device of this demo first saw the message, so devices
 * that were not watching may disagree with what a real message service would say.
 */
export class Activity {
  private record: DemoActivityReply = {
    activity: Object.create(null) as Record<string, number>,
    messages: Object.create(null) as Record<string, DemoKeptMessage[]>,
  };
  private readonly lastSeen = new Map<string, number>();
  private settle: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly changed: () => void) {}

  /**
   * The list's entries, most recently active first, then by id: a conversation with its topics is
   * as recent as its newest row; Redpoint's last activity (`at`) first, this demo's record where Redpoint has none.
   */
  readonly order = (a: ConversationGroup, b: ConversationGroup): number =>
    (this.entryAt(b) ?? 0) - (this.entryAt(a) ?? 0) || (a.conv < b.conv ? -1 : a.conv > b.conv ? 1 : 0);

  /** When a list entry was last active: its newest row's time (Redpoint's, else this demo's record). */
  entryAt(g: ConversationGroup): number | undefined {
    if (g.at !== undefined) return g.at;
    const seen = [g.view, ...g.children].flatMap((c) => (c ? [this.activeAt(c)] : [])).filter((t) => t !== undefined);
    return seen.length > 0 ? Math.max(...seen) : undefined;
  }

  /** When `c` was last active: Redpoint's `at` (issue 43: the same on every device), else when a device of this demo saw it. */
  activeAt(c: ConversationView): number | undefined {
    return c.at ?? this.at(c.conv);
  }

  /** When `conv` was last active, if any device of the demo saw it happen. */
  at(conv: string): number | undefined {
    return Object.hasOwn(this.record.activity, conv) ? this.record.activity[conv] : undefined;
  }

  /** What the test tools sent to `conv`, oldest first. */
  messages(conv: string): readonly DemoKeptMessage[] {
    return (Object.hasOwn(this.record.messages, conv) ? this.record.messages[conv] : undefined) ?? [];
  }

  load(): void {
    getActivity().then(this.adopt, warn);
  }

  /**
   * Called on every paint: a newer message arrived while this page watched, so report it. Then,
   * once things have been still for a moment, read the record again: another device or the
   * tools (which report after sending) may have stamped what this one saw arrive.
   */
  watch(state: RedpointState): void {
    let moved = false;
    for (const c of state.conversations) {
      const before = this.lastSeen.get(c.conv);
      if (before === c.lastSeq) continue;
      if (before !== undefined && c.lastSeq > before) reportActivity(c.conv, c.lastSeq).then(this.adopt, warn);
      this.lastSeen.set(c.conv, c.lastSeq);
      moved = true;
    }
    if (!moved) return;
    clearTimeout(this.settle);
    this.settle = setTimeout(() => this.load(), SETTLE_MS);
  }

  /** The tools sent `messages` to `conv`. */
  sent(conv: string, messages: Array<Omit<DemoKeptMessage, 'at'> & { agoMs: number }>): Promise<void> {
    const seq = Math.max(...messages.map((m) => m.seq));
    return reportActivity(conv, seq, messages).then(this.adopt);
  }

  private readonly adopt = (record: DemoActivityReply): void => {
    this.record = {
      activity: Object.assign(Object.create(null) as Record<string, number>, record.activity),
      messages: Object.assign(Object.create(null) as Record<string, DemoKeptMessage[]>, record.messages),
    };
    this.changed();
  };
}

/** How long after the last change the record is read again (the tools report once their send is answered). */
const SETTLE_MS = 700;

const warn = (err: unknown): void => console.warn('[demo] activity', err);
