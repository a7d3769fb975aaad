import type { ChangeFrame, HeadFrame, SyncFrame, VersionFrame } from '../../protocol/frames.js';
import type { ConvState, ConvView, Cursor } from '../../protocol/types.js';
import { headOf } from '../../protocol/view.js';
import { clientViews } from './client-view.js';

/** What a client keeps across connections: cursor, conversation states, heads. */
export interface SavedState {
  cursor: Cursor | null;
  states: ConvState[];
  heads: Record<string, number>;
}

export interface ClientStats {
  /** Sync pages received, and how many carried a snapshot. */
  pages: number;
  snapshots: number;
  pullsSent: number;
  /** Pulls caused by a push that was not the next version. */
  gapPulls: number;
  /** Pulls caused by a `version` frame ahead of the cursor. */
  versionPulls: number;
  pushesApplied: number;
  /** Pushes at or below the cursor (already had them). */
  pushesStale: number;
  /** Pushes dropped on purpose by `dropNext`. */
  pushesDropped: number;
}

/**
 * What a client shows of `states`: the visible conversations, sorted by id, derived from
 * PROTOCOL.md by helpers/client-view.ts (not by protocol/view.ts, which the server uses: a bug
 * there would otherwise be on both sides of every comparison).
 */
export function viewsOf(
  states: Iterable<ConvState>,
  heads: Readonly<Record<string, number>>,
  extras: {
    headAt?: Readonly<Record<string, number>>;
    mentionAll?: Readonly<Record<string, readonly number[]>>;
    nocount?: Readonly<Record<string, readonly number[]>>;
  } = {},
): ConvView[] {
  return clientViews(states, heads, extras);
}

/** The frames that move a client's state. */
export type StateFrame = SyncFrame | ChangeFrame | HeadFrame | VersionFrame;

/**
 * The client half of PROTOCOL.md's sync rules, without the socket (WsClient puts it on one): a
 * sync page replaces everything when it carries a snapshot, `more` → pull again, a `change` push
 * is applied only when it is the next version (otherwise the client pulls from its cursor),
 * `head` frames raise heads, a `version` frame ahead of the cursor triggers a pull.
 *
 * Pushes that arrive while a pull is in flight are held and replayed after the reply, so a late
 * reply never overwrites a newer pushed state. Protocol violations seen on the way (a delta from
 * another epoch, a cursor going back, entries out of order) are collected in `violations`.
 */
export abstract class SyncReplica {
  readonly violations: string[] = [];
  readonly stats: ClientStats = { pages: 0, snapshots: 0, pullsSent: 0, gapPulls: 0, versionPulls: 0, pushesApplied: 0, pushesStale: 0, pushesDropped: 0 };
  states = new Map<string, ConvState>();
  /** Null-prototype: a conversation may be named `__proto__` like any other. */
  heads: Record<string, number> = headsOf({});
  /**
   * Read-diffused conversations' extras (PROTOCOL.md "Read-diffused groups"): `at` max-merged,
   * @all and non-counting seqs as unions, from sync replies and `head` pushes alike; dropped
   * with the conversation, when it leaves read diffusion, and with another epoch.
   */
  extras = new Map<string, { at: number; all: Set<number>; nocount: Set<number> }>();
  cursor: Cursor | null;

  /** Request ids, shared by pulls and whatever else the subclass sends with an id. */
  protected nextId = 1;
  /** Id of the pull chain in flight ('hello' for the reply to hello), or null. */
  protected inflight: number | 'hello' | null = null;
  /** Pull chains (a pull, then the pages its `more` asks for) started and finished. */
  protected chainsStarted = 0;
  protected chainsDone = 0;
  private wantPull = false;
  private held: ChangeFrame[] = [];

  protected constructor(
    cursor: Cursor | null | undefined,
    saved: SavedState | undefined,
    private readonly pullLimit: number | undefined,
  ) {
    this.cursor = cursor !== undefined ? cursor : (saved?.cursor ?? null);
    if (saved) {
      this.states = new Map(saved.states.map((st) => [st.conv, { ...st }]));
      this.heads = headsOf(saved.heads);
    }
  }

  abstract send(frame: object): void;

  /** A copy of the local state, to reconnect with later. */
  save(): SavedState {
    return { cursor: this.cursor ? { ...this.cursor } : null, states: [...this.states.values()].map((st) => ({ ...st })), heads: headsOf(this.heads) };
  }

  /** Visible conversations, sorted by id, derived exactly as the server does. */
  views(): ConvView[] {
    return viewsOf(this.states.values(), this.heads, this.extrasRecord());
  }

  /** `extras` as a PullReply's three maps. */
  extrasRecord(): {
    headAt: Record<string, number>;
    mentionAll: Record<string, number[]>;
    nocount: Record<string, number[]>;
  } {
    const out = { headAt: headsOf({}), mentionAll: Object.create(null) as Record<string, number[]>, nocount: Object.create(null) as Record<string, number[]> };
    for (const [conv, x] of this.extras) {
      if (!this.states.get(conv)?.large) continue;
      if (x.at > 0) out.headAt[conv] = x.at;
      if (x.all.size > 0) out.mentionAll[conv] = [...x.all].sort((a, b) => a - b);
      if (x.nocount.size > 0) out.nocount[conv] = [...x.nocount].sort((a, b) => a - b);
    }
    return out;
  }

  private addExtras(conv: string, at: number, all: readonly number[], nocount: readonly number[]): void {
    let x = this.extras.get(conv);
    if (!x) {
      x = { at: 0, all: new Set(), nocount: new Set() };
      this.extras.set(conv, x);
    }
    x.at = Math.max(x.at, at);
    for (const s of all) x.all.add(s);
    for (const s of nocount) x.nocount.add(s);
  }

  /** Keeps the extras of the conversations held and read-diffused only. */
  private retainExtras(): void {
    for (const conv of [...this.extras.keys()]) if (!this.states.get(conv)?.large) this.extras.delete(conv);
  }

  /** Hello was sent: its reply is the first pull chain. */
  protected helloSent(): void {
    this.inflight = 'hello';
    this.chainsStarted++;
  }

  protected receive(frame: StateFrame): void {
    switch (frame.t) {
      case 'sync':
        this.onSync(frame);
        return;
      case 'change':
        if (this.inflight !== null) this.held.push(frame);
        else this.onChange(frame);
        return;
      case 'head':
        this.heads[frame.conv] = Math.max(headOf(this.heads, frame.conv), frame.lastSeq);
        if (this.states.get(frame.conv)?.large) this.addExtras(frame.conv, frame.headAt ?? 0, frame.mentionAll ?? [], frame.nocount ?? []);
        return;
      case 'version':
        this.onVersion(frame);
        return;
    }
  }

  protected requestPull(): void {
    if (this.inflight !== null) {
      this.wantPull = true;
      return;
    }
    this.chainsStarted++;
    this.sendPull();
  }

  private onSync(f: SyncFrame): void {
    this.stats.pages++;
    const previous = this.cursor;
    if (f.snapshot) {
      this.stats.snapshots++;
      if (f.snapshot.v > f.version) this.violations.push(`snapshot v${f.snapshot.v} beyond reply version ${f.version}`);
      this.states = new Map(f.snapshot.convs.map((s) => [s.conv, { ...s }]));
      if (previous?.epoch !== f.epoch) this.extras.clear();
    } else if (!previous) {
      this.violations.push('first sync without a snapshot');
    } else if (previous.epoch !== f.epoch) {
      this.violations.push(`delta from epoch ${f.epoch} applied to a cursor of epoch ${previous.epoch}`);
    }
    let last = f.snapshot ? f.snapshot.v : (previous?.version ?? 0);
    for (const e of f.entries) {
      if (e.v <= last) this.violations.push(`entry v${e.v} not after v${last}`);
      last = e.v;
      if (e.state === null) this.states.delete(e.conv);
      else this.states.set(e.conv, { ...e.state });
    }
    if (f.version !== last) this.violations.push(`reply version ${f.version} but last applied v${last}`);
    if (previous && previous.epoch === f.epoch && f.version < previous.version) {
      this.violations.push(`cursor went back from ${previous.version} to ${f.version}`);
    }
    this.cursor = { epoch: f.epoch, version: f.version };
    for (const [conv, seq] of Object.entries(f.heads)) this.heads[conv] = Math.max(headOf(this.heads, conv), seq);
    for (const [conv, at] of Object.entries(f.headAt ?? {})) this.addExtras(conv, at, [], []);
    for (const [conv, seqs] of Object.entries(f.mentionAll ?? {})) this.addExtras(conv, 0, seqs, []);
    for (const [conv, seqs] of Object.entries(f.nocount ?? {})) this.addExtras(conv, 0, [], seqs);
    this.retainExtras();

    // Replies to pulls sent by hand (WsClient.request) are applied too, but only our own chain drives paging.
    const ours = f.id === undefined ? this.inflight === 'hello' : f.id === this.inflight;
    if (!ours) return;
    if (f.more) {
      this.sendPull();
      return;
    }
    this.inflight = null;
    this.chainsDone++;
    const held = this.held.sort((a, b) => a.v - b.v);
    this.held = [];
    for (const change of held) {
      if (this.inflight !== null) this.held.push(change);
      else this.onChange(change);
    }
    if (this.wantPull && this.inflight === null) {
      this.wantPull = false;
      this.requestPull();
    }
  }

  private onChange(f: ChangeFrame): void {
    const c = this.cursor;
    if (c && f.epoch === c.epoch && f.v === c.version + 1) {
      if (f.state === null) this.states.delete(f.conv);
      else this.states.set(f.conv, { ...f.state });
      this.retainExtras();
      this.cursor = { epoch: c.epoch, version: f.v };
      this.stats.pushesApplied++;
      return;
    }
    if (c && f.epoch === c.epoch && f.v <= c.version) {
      this.stats.pushesStale++;
      return;
    }
    this.stats.gapPulls++;
    this.requestPull();
  }

  /**
   * A pull of our chain answered with an error (`unavailable` in a failover, `rate_limited`):
   * the chain ends, and the caller pulls again later (PROTOCOL.md: retry after the hint). True
   * when `id` was our pull in flight.
   */
  protected pullFailed(id: number): boolean {
    if (this.inflight !== id) return false;
    this.inflight = null;
    this.chainsDone++;
    this.wantPull = false;
    return true;
  }

  private onVersion(f: VersionFrame): void {
    const c = this.cursor;
    if (c && c.epoch === f.epoch && c.version >= f.version) return;
    this.stats.versionPulls++;
    this.requestPull();
  }

  private sendPull(): void {
    const id = this.nextId++;
    this.inflight = id;
    this.stats.pullsSent++;
    this.send({
      t: 'pull',
      id,
      ...(this.cursor ? { since: this.cursor } : {}),
      ...(this.pullLimit ? { limit: this.pullLimit } : {}),
    });
  }
}

/** A null-prototype copy of `heads`, safe to assign any conversation id in. */
function headsOf(heads: Readonly<Record<string, number>>): Record<string, number> {
  return Object.assign(Object.create(null) as Record<string, number>, heads);
}
