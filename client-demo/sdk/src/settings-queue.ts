import type { SettingsChange } from './store.js';

/** An "unread from here" (the seq and the new read generation), queued in order with the settings changes. */
interface UnreadFromChange {
  unreadFrom: number;
  gen: number;
}

/** A thread's follow or unfollow (PROTOCOL.md "Threads"), queued under the thread's id. */
interface FollowChange {
  follow: { conv: string; root: number };
  unfollow: boolean;
}

/** A change of the user's own settings (PROTOCOL.md "Notification levels"), queued under USER_SETTINGS. */
interface UserSettingsChange {
  mutedMentions: boolean;
}

/**
 * The queue key of the user's own settings: not a conversation id (ids are never empty), so its
 * ack or refusal touches no conversation's overlay.
 */
export const USER_SETTINGS = '';

/** What the queue sends: a settings frame's change, an "unread from here", a follow, or a user setting. */
export type QueuedChange = SettingsChange | UnreadFromChange | FollowChange | UserSettingsChange;

import { Timer, type Timers } from './timers.js';

interface Request {
  conv: string;
  change: QueuedChange;
  resolve(): void;
  reject(err: Error): void;
  /** Request id of the frame on the current connection; null until sent. */
  id: number | null;
}

export interface SettingsQueueOptions {
  timers: Timers;
  /** Delay before a request the server refused for a passing reason goes again. */
  retryMs: number;
  /** Sends one settings or unread-from frame; returns its request id, or null when offline. */
  send(conv: string, change: QueuedChange): number | null;
}

/**
 * Mute / mark unread / delete / "unread from here" / follow / user-settings requests, in the order the user made them,
 * kept until acknowledged and sent again after a reconnect (each carries absolute values, and an
 * unread-from its generation, so a repeat is harmless).
 */
export class SettingsQueue {
  private readonly requests: Request[] = [];
  private readonly retryTimer: Timer;

  constructor(private readonly options: SettingsQueueOptions) {
    this.retryTimer = new Timer(options.timers, () => this.flush());
  }

  get pending(): number {
    return this.requests.length;
  }

  submit(conv: string, change: QueuedChange): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.requests.push({ conv, change, resolve, reject, id: null });
      this.flush();
    });
  }

  /** Sends every request not yet sent on this connection. */
  flush(): void {
    for (const request of this.requests) {
      if (request.id !== null) continue;
      const id = this.options.send(request.conv, request.change);
      if (id === null) return;
      request.id = id;
    }
  }

  /** Requests of `conv` not yet acknowledged (queued or in flight). */
  pendingFor(conv: string): boolean {
    return this.requests.some((r) => r.conv === conv);
  }

  owns(id: number): boolean {
    return this.requests.some((r) => r.id === id);
  }

  /** Returns the conversation of acknowledged request `id` (undefined: not ours). */
  ack(id: number): string | undefined {
    const request = this.take(id);
    request?.resolve();
    return request?.conv;
  }

  fail(id: number, err: Error): string | undefined {
    const request = this.take(id);
    request?.reject(err);
    return request?.conv;
  }

  /** The server refused request `id` for a passing reason: send it again after `retryMs`. */
  retry(id: number): void {
    const request = this.requests.find((r) => r.id === id);
    if (!request) return;
    request.id = null;
    this.retryTimer.arm(this.options.retryMs);
  }

  /** The connection dropped: every request goes again on the next one. */
  disconnected(): void {
    for (const request of this.requests) request.id = null;
    this.retryTimer.cancel();
  }

  rejectAll(err: Error): void {
    this.retryTimer.cancel();
    for (const request of this.requests.splice(0)) request.reject(err);
  }

  private take(id: number): Request | undefined {
    const index = this.requests.findIndex((r) => r.id === id);
    return index < 0 ? undefined : this.requests.splice(index, 1)[0];
  }
}
