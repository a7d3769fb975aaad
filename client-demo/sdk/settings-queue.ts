import type { SettingsChange } from './store.js';

interface Request {
  conv: string;
  change: SettingsChange;
  resolve(): void;
  reject(err: Error): void;
  /** Request id of the frame on the current connection; null until sent. */
  id: number | null;
}

/** Sends one settings frame; returns its request id, or null when offline. */
export type SendSettings = (conv: string, change: SettingsChange) => number | null;

/**
 * Mute / mark unread / delete requests, in the order the user made them, kept until acknowledged
 * and sent again after a reconnect (each carries absolute values, so a repeat is harmless).
 */
export class SettingsQueue {
  private readonly requests: Request[] = [];

  constructor(private readonly send: SendSettings) {}

  get pending(): number {
    return this.requests.length;
  }

  submit(conv: string, change: SettingsChange): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.requests.push({ conv, change, resolve, reject, id: null });
      this.flush();
    });
  }

  /** Sends every request not yet sent on this connection. */
  flush(): void {
    for (const request of this.requests) {
      if (request.id !== null) continue;
      const id = this.send(request.conv, request.change);
      if (id === null) return;
      request.id = id;
    }
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

  /** Marks request `id` unsent, to go again with the next flush. */
  retry(id: number): boolean {
    const request = this.requests.find((r) => r.id === id);
    if (request) request.id = null;
    return request !== undefined;
  }

  disconnected(): void {
    for (const request of this.requests) request.id = null;
  }

  rejectAll(err: Error): void {
    for (const request of this.requests.splice(0)) request.reject(err);
  }

  private take(id: number): Request | undefined {
    const index = this.requests.findIndex((r) => r.id === id);
    return index < 0 ? undefined : this.requests.splice(index, 1)[0];
  }
}
