/**
 * Membership for the baseline servers, in process memory: the same threshold rule as Redpoint
 * (more members than the threshold → one topic per conversation instead of one per member).
 */
export interface BaselineMessage {
  conv: string;
  seq: number;
  sender: string;
}

interface Conversation {
  members: Set<string>;
  large: boolean;
}

export class Membership {
  private readonly convs = new Map<string, Conversation>();
  private readonly largeByUser = new Map<string, Set<string>>();

  constructor(private readonly threshold: number) {}

  add(conv: string, uids: readonly string[]): void {
    let c = this.convs.get(conv);
    if (!c) {
      c = { members: new Set(), large: false };
      this.convs.set(conv, c);
    }
    for (const uid of uids) c.members.add(uid);
    if (!c.large && c.members.size > this.threshold) {
      c.large = true;
      for (const uid of c.members) this.follow(uid, conv);
    } else if (c.large) {
      for (const uid of uids) this.follow(uid, conv);
    }
  }

  get(conv: string): { members: ReadonlySet<string>; large: boolean } | undefined {
    return this.convs.get(conv);
  }

  /** Large conversations the user must subscribe to when it connects. */
  largeConvsOf(uid: string): readonly string[] {
    return [...(this.largeByUser.get(uid) ?? [])];
  }

  private follow(uid: string, conv: string): void {
    let set = this.largeByUser.get(uid);
    if (!set) {
      set = new Set();
      this.largeByUser.set(uid, set);
    }
    set.add(conv);
  }
}

/** The same body `POST /v1/messages` takes: one message, or `{messages: [...]}`. */
export function parseMessages(body: unknown): BaselineMessage[] {
  const list = typeof body === 'object' && body !== null && 'messages' in body ? (body as { messages: unknown }).messages : [body];
  if (!Array.isArray(list)) throw new Error('messages: not an array');
  return list.map((m: unknown) => {
    const { conv, seq, sender } = (m ?? {}) as Partial<BaselineMessage>;
    if (typeof conv !== 'string' || typeof seq !== 'number' || typeof sender !== 'string') throw new Error('bad message');
    return { conv, seq, sender };
  });
}

/** The push every baseline sends: as small as Redpoint's, `<conv, lastSeq>`. */
export function pushFrame(conv: string, seq: number): string {
  return `{"t":"change","conv":${JSON.stringify(conv)},"lastSeq":${seq}}`;
}

export const threshold = (): number => Number(process.env.LARGE_GROUP_THRESHOLD ?? 500);
