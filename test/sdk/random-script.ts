import type { RedpointClient } from '../../client-demo/sdk/src/index.js';
import { threadConv, topicConv } from '../../protocol/child-id.js';
import type { MessageEvent } from '../../protocol/types.js';

/**
 * The actions of test/sdk/random.test.ts, drawn from one PRNG stream: which they are depends on
 * the seed only (never on what the devices show, which depends on timing), so a seed replays the
 * same script. They cover issue 43's model: messages that do not count, recalls (before and after
 * their message, sent twice), `at` stamps out of order, @all, topics and threads (replies, implicit
 * and explicit follows, unfollows), notification levels, beside reads, "unread from here", mute,
 * mark unread and delete; messages are duplicated and held back (posted later, out of order).
 */

export interface ScriptDevice {
  uid: string;
  client: RedpointClient;
}

export interface ScriptServer {
  post(messages: MessageEvent | MessageEvent[]): Promise<void>;
  ok(method: string, path: string, body?: unknown): Promise<unknown>;
}

/** Stamps around a fixed time (replayable, and within the server's "not more than 24 h ahead"). */
const T0 = 1_760_000_000_000;
const TOPICS = ['a', 'b'];
const ROOTS = [1, 2, 3];
const LEVELS = ['all', 'mentions', 'none'] as const;

export class RandomScript {
  /** What the script did, step by step: the same seed must give the same list (printed as a digest). */
  readonly log: string[] = [];
  /** Each row's newest seq handed out (conversation, topic or thread id). */
  private readonly seqs = new Map<string, number>();
  /** The rows known to exist on the server, per conversation (topics posted to, threads replied to or followed). */
  private readonly children = new Map<string, Set<string>>();
  /** Messages posted, any of which may be posted again (a duplicate). */
  private readonly posted: MessageEvent[] = [];
  /** Messages held back, posted at a later step (a reorder). */
  private held: MessageEvent[] = [];
  private step = 0;

  constructor(
    private readonly rnd: () => number,
    private readonly server: ScriptServer,
    private readonly convs: Readonly<Record<string, readonly string[]>>,
    private readonly devices: readonly ScriptDevice[],
  ) {}

  private pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.rnd() * xs.length)] as T;
  }

  /** Runs `steps` actions. */
  async run(steps: number): Promise<void> {
    for (let i = 0; i < steps; i++) await this.next();
  }

  /** Posts every message still held back, in reverse (the last held first). */
  async flush(): Promise<void> {
    const held = this.held.reverse();
    this.held = [];
    for (const m of held) await this.send([m]);
  }

  private async next(): Promise<void> {
    const step = this.step++;
    const r = this.rnd();
    const conv = this.pick(Object.keys(this.convs));
    this.log.push(`${step}:${r.toFixed(6)}:${conv}`);
    const members = this.convs[conv] ?? [];
    if (this.held.length > 0 && this.rnd() < 0.3) {
      const i = Math.floor(this.rnd() * this.held.length);
      await this.send(this.held.splice(i, 1));
    }
    if (r < 0.45) await this.message(conv, members, step);
    else if (r < 0.5) {
      if (this.posted.length > 0) await this.send([this.pick(this.posted)]);
    } else await this.deviceAction(conv, members);
    if (this.rnd() < 0.2) await new Promise((resolve) => setTimeout(resolve, Math.floor(this.rnd() * 20)));
  }

  private async message(conv: string, members: readonly string[], step: number): Promise<void> {
    const where = this.rnd();
    const topic = where < 0.15 && members.length > 2 ? this.pick(TOPICS) : undefined;
    const thread = topic === undefined && where > 0.8 ? this.pick(ROOTS) : undefined;
    const row = topic !== undefined ? topicConv(conv, topic) : thread !== undefined ? threadConv(conv, thread) : conv;
    const seq = (this.seqs.get(row) ?? 0) + 1 + (this.rnd() < 0.1 ? 1 : 0);
    this.seqs.set(row, seq);
    const sender = this.pick(members);
    const m: MessageEvent = { conv, seq, sender };
    if (topic !== undefined) m.topic = topic;
    if (thread !== undefined) {
      m.thread = thread;
      if (this.rnd() < 0.5) m.rootSender = this.pick(members);
    }
    if (this.rnd() < 0.2) m.mentions = [this.pick(members)];
    if (this.rnd() < 0.1) m.mentionAll = true;
    // Mostly increasing, sometimes older than the newest: the last activity is a max-register.
    if (this.rnd() < 0.7) m.at = T0 + step * 1_000 + Math.floor((this.rnd() - 0.5) * 6_000);
    if (this.rnd() < 0.12) m.counts = false;
    // A recall of a seq sent, or of one not sent yet (before its message); a notice that does not count.
    if (this.rnd() < 0.1) {
      m.recalls = [1 + Math.floor(this.rnd() * (seq + 2))];
      m.counts = false;
    }
    this.log.push(`m:${JSON.stringify(m)}`);
    if (this.rnd() < 0.15) this.held.push(m);
    else await this.send([m]);
  }

  private async send(messages: MessageEvent[]): Promise<void> {
    await this.server.post(messages);
    for (const m of messages) {
      this.posted.push(m);
      if (m.topic !== undefined) this.childrenOf(m.conv).add(topicConv(m.conv, m.topic));
      if (m.thread !== undefined) this.childrenOf(m.conv).add(threadConv(m.conv, m.thread));
    }
  }

  private childrenOf(conv: string): Set<string> {
    let rows = this.children.get(conv);
    if (!rows) {
      rows = new Set();
      this.children.set(conv, rows);
    }
    return rows;
  }

  private async deviceAction(conv: string, members: readonly string[]): Promise<void> {
    const device = this.pick(this.devices);
    const r = this.rnd();
    // The conversation or one of its rows known to exist (the user may not follow a thread: the server refuses, the SDK takes it back).
    const row = this.pick([conv, ...[...(this.children.get(conv) ?? [])].sort()]);
    this.log.push(`d:${device.uid}:${row}:${r.toFixed(6)}`);
    if (!members.includes(device.uid)) return;
    const c = device.client;
    // A refusal (a thread not followed, a topic not there yet) rejects: the SDK takes its optimistic change back.
    const settled = (p: Promise<void>): void => void p.catch(() => undefined);
    const head = this.seqs.get(row) ?? 0;
    if (r < 0.4) c.markRead(row, Math.floor(this.rnd() * (head + 1)));
    else if (r < 0.47) {
      // "Unread from here" from one device while the others read: readSeq goes down in their pushes too.
      if (head > 0) settled(c.markUnreadFrom(row, 1 + Math.floor(this.rnd() * head)));
    } else if (r < 0.55) settled(c.setLevel(row, this.pick(LEVELS)));
    else if (r < 0.6) settled(c.mute(row, this.rnd() < 0.5));
    else if (r < 0.67) settled(c.markUnread(row, this.rnd() < 0.5));
    else if (r < 0.72) settled(c.deleteConversation(row));
    else if (r < 0.88) {
      const root = this.pick(ROOTS);
      this.childrenOf(conv).add(threadConv(conv, root));
      settled(this.rnd() < 0.65 ? c.follow(conv, root) : c.unfollow(conv, root));
    } else
      await this.server.ok('POST', `/v1/users/${device.uid}/read`, { conv: row, seq: head }).catch((err: unknown) => {
        // Not followed (403) or not there yet (404): what the server says, not a failure of the test.
        if (!/40[34]/.test(String(err))) throw err;
      });
  }
}
