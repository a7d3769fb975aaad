import { encodeMsgpack } from '../../protocol/codec.js';
import type { ChangeFrame, HeadFrame, ReadsFrame } from '../../protocol/frames.js';
import type { HeadChange, Notifications, ReadsChange, UserChange } from '../engine/notifications.js';
import type { Metrics } from '../metrics/metrics.js';
import { Coalescer } from '../sync/coalescer.js';
import { wallClockMs } from '../sync/ingest.js';
import { changeFrameJson } from './frame-json.js';
import type { TemplatedApp } from './uws.js';

/** uWS topic names: braces keep a user's and a conversation's topics apart whatever the ids. */
export const userTopic = (uid: string, binary: boolean): string => `{u:${uid}}${binary ? 'm' : 'j'}`;
export const convTopic = (conv: string, binary: boolean): string => `{c:${conv}}${binary ? 'm' : 'j'}`;

export interface LocalDelivery {
  /** A user change reached this process: keep large-group subscriptions in step with membership. */
  onUserChange(change: UserChange): void;
}

/**
 * The store's notifications → uWS topics of this process's sockets. Every change reaches a
 * process the same way, whichever process made it, so one user's pushes leave in version order.
 * Each channel has a JSON and a MessagePack topic: a frame is encoded once per format, and a
 * large-group message is ONE uWS publish per format whatever the group size.
 */
export class Fanout {
  /** Others' reads, per user and conversation: at most one `reads` frame per interval to this process's sockets of the user, the latest. */
  private readonly reads: Coalescer<ReadsChange>;

  constructor(
    private readonly app: TemplatedApp,
    private readonly notifications: Notifications,
    private readonly metrics: Metrics,
    private readonly delivery: LocalDelivery,
    /** Test-only: drop this fraction of pushes, to prove that pulls repair what pushes miss. */
    private readonly dropRatio = 0,
    /** RECEIPTS_PUSH_INTERVAL_MS. */
    readsIntervalMs = 1000,
  ) {
    this.reads = new Coalescer(readsIntervalMs, (_key, change) => this.deliverReads(change));
    notifications.setHandler({
      userChanged: (changes) => {
        for (const c of changes) this.deliverUser(c);
      },
      headChanged: (change) => this.deliverHead(change),
      readsChanged: (change) => this.reads.put(`${change.uid}\n${change.conv}`, change),
    });
  }

  /** Drops the `reads` frames still waiting (shutdown). */
  close(): void {
    this.reads.close();
  }

  followUser(uid: string): Promise<void> {
    return this.notifications.followUser(uid);
  }

  unfollowUser(uid: string): void {
    this.notifications.unfollowUser(uid);
  }

  followConversation(conv: string): Promise<void> {
    return this.notifications.followConversation(conv);
  }

  unfollowConversation(conv: string): void {
    this.notifications.unfollowConversation(conv);
  }

  private deliverUser(c: UserChange): void {
    this.delivery.onUserChange(c);
    const frame: ChangeFrame = { t: 'change', epoch: c.epoch, v: c.version, conv: c.conv, state: c.state };
    this.publish(userTopic(c.uid, false), userTopic(c.uid, true), frame, c.at, changeFrameJson);
  }

  private deliverHead(h: HeadChange): void {
    const frame: HeadFrame = {
      t: 'head',
      conv: h.conv,
      lastSeq: h.maxSeq,
      ...(h.headAt !== undefined ? { headAt: h.headAt } : {}),
      ...(h.mentionAll !== undefined ? { mentionAll: h.mentionAll } : {}),
      ...(h.nocount !== undefined ? { nocount: h.nocount } : {}),
    };
    this.publish(convTopic(h.conv, false), convTopic(h.conv, true), frame, h.at, JSON.stringify);
  }

  private deliverReads(r: ReadsChange): void {
    const frame: ReadsFrame = { t: 'reads', conv: r.conv, members: r.members, reads: r.reads };
    this.publish(userTopic(r.uid, false), userTopic(r.uid, true), frame, undefined, JSON.stringify);
  }

  private publish<F extends ChangeFrame | HeadFrame | ReadsFrame>(
    jsonTopic: string,
    binTopic: string,
    frame: F,
    at: number | undefined,
    json: (frame: F) => string,
  ): void {
    if (this.dropRatio > 0 && Math.random() < this.dropRatio) {
      this.metrics.frameCounts.add('dropped_by_test_switch');
      return;
    }
    const jsonSubs = this.app.numSubscribers(jsonTopic);
    const binSubs = this.app.numSubscribers(binTopic);
    if (jsonSubs > 0) this.app.publish(jsonTopic, json(frame), false);
    if (binSubs > 0) this.app.publish(binTopic, encodeMsgpack(frame), true);
    const reached = jsonSubs + binSubs;
    this.metrics.fanout.observe(reached);
    if (reached > 0) {
      this.metrics.frameCounts.add(frame.t);
      if (at !== undefined) this.metrics.notifyLatency.observe(Math.max(0, wallClockMs() - at) / 1000);
    }
  }
}
