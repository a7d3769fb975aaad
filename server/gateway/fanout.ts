import { encodeMsgpack, packr } from '../../protocol/codec.js';
import type { ChangeFrame, HeadFrame } from '../../protocol/frames.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Bus } from '../pubsub/bus.js';
import { wallClockMs } from '../sync/ingest.js';
import type { HeadChange, SyncEvents, UserChange } from '../sync/events.js';
import type { TemplatedApp } from './uws.js';

/** Topic/channel names. Braces are Redis Cluster hash tags: a user's channel lives on its shard. */
export const userChannel = (uid: string): string => `{u:${uid}}`;
export const convChannel = (conv: string): string => `{c:${conv}}`;
/** Each channel has a JSON and a MessagePack topic, so one publish serves every socket of a format. */
export const topicFor = (channel: string, binary: boolean): string => `${channel}${binary ? 'm' : 'j'}`;

type BusEvent = ['u', UserChange] | ['h', HeadChange];

export interface LocalDelivery {
  /** A user change reached this process: keep large-group subscriptions in step with membership. */
  onUserChange(change: UserChange): void;
}

/**
 * Sync events → uWS topics of this process's sockets, directly, and → the bus for the other
 * processes (which deliver what they receive the same way). A large-group message is ONE bus
 * publish and ONE uWS publish per format, whatever the group size.
 */
export class Fanout {
  private readonly refs = new Map<string, number>();

  constructor(
    private readonly app: TemplatedApp,
    private readonly bus: Bus | null,
    private readonly metrics: Metrics,
    private readonly delivery: LocalDelivery,
    events: SyncEvents,
    /** Test-only: drop this fraction of pushes, to prove that pulls repair what pushes miss. */
    private readonly dropRatio = 0,
  ) {
    events.subscribe({
      userChanged: (change) => this.emit(userChannel(change.uid), ['u', change]),
      headChanged: (change) => this.emit(convChannel(change.conv), ['h', change]),
    });
    bus?.onMessage((_channel, payload) => this.receive(payload));
  }

  /** Counts local interest in a channel; the bus subscribes at the first and leaves at the last. */
  retain(channel: string): Promise<void> {
    const n = (this.refs.get(channel) ?? 0) + 1;
    this.refs.set(channel, n);
    return this.bus ? this.bus.subscribe(channel) : Promise.resolve();
  }

  release(channel: string): void {
    const n = (this.refs.get(channel) ?? 0) - 1;
    if (n > 0) {
      this.refs.set(channel, n);
      return;
    }
    this.refs.delete(channel);
    this.bus?.unsubscribe(channel);
  }

  private emit(channel: string, event: BusEvent): void {
    if (this.refs.has(channel)) this.deliver(event);
    this.bus?.publish(channel, encodeMsgpack(event));
  }

  private receive(payload: Uint8Array): void {
    let event: BusEvent;
    try {
      event = packr.unpack(payload) as BusEvent;
    } catch {
      return; // not ours: the bus prefix is shared with nothing else, but never crash on input
    }
    this.deliver(event);
  }

  private deliver(event: BusEvent): void {
    if (event[0] === 'u') {
      const c = event[1];
      this.delivery.onUserChange(c);
      const frame: ChangeFrame = { t: 'change', epoch: c.epoch, v: c.version, conv: c.conv, state: c.state };
      this.publish(userChannel(c.uid), frame, c.at);
    } else {
      const h = event[1];
      const frame: HeadFrame = { t: 'head', conv: h.conv, lastSeq: h.maxSeq };
      this.publish(convChannel(h.conv), frame, h.at);
    }
  }

  private publish(channel: string, frame: ChangeFrame | HeadFrame, at: number | undefined): void {
    if (this.dropRatio > 0 && Math.random() < this.dropRatio) {
      this.metrics.framesOut.inc({ type: 'dropped_by_test_switch' });
      return;
    }
    const jsonTopic = topicFor(channel, false);
    const binTopic = topicFor(channel, true);
    const jsonSubs = this.app.numSubscribers(jsonTopic);
    const binSubs = this.app.numSubscribers(binTopic);
    if (jsonSubs > 0) this.app.publish(jsonTopic, JSON.stringify(frame), false);
    if (binSubs > 0) this.app.publish(binTopic, encodeMsgpack(frame), true);
    const reached = jsonSubs + binSubs;
    this.metrics.fanout.observe(reached);
    if (reached > 0) {
      this.metrics.framesOut.inc({ type: frame.t });
      if (at !== undefined) this.metrics.notifyLatency.observe(Math.max(0, wallClockMs() - at) / 1000);
    }
  }
}
