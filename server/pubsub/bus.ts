/**
 * Carries notifications between server processes. Channels are subscribed only while a local
 * connection needs them (a user online here, a large group with members online here), so a
 * process never receives traffic for users it does not serve.
 *
 * `publish` delivers to this process's own handler directly (when it subscribes the channel) and
 * to every other subscribed process through the store; it never waits for the store.
 */
export interface Bus {
  publish(channel: string, payload: Uint8Array): void;
  /** Resolves once messages published on the channel anywhere will reach this process. */
  subscribe(channel: string): Promise<void>;
  unsubscribe(channel: string): void;
  onMessage(handler: (channel: string, payload: Uint8Array) => void): void;
  close(): Promise<void>;
}

/** Single-process bus: the memory engine's companion. */
export class LocalBus implements Bus {
  private readonly channels = new Set<string>();
  private handler: ((channel: string, payload: Uint8Array) => void) | undefined;

  publish(channel: string, payload: Uint8Array): void {
    if (this.channels.has(channel)) this.handler?.(channel, payload);
  }

  async subscribe(channel: string): Promise<void> {
    this.channels.add(channel);
  }

  unsubscribe(channel: string): void {
    this.channels.delete(channel);
  }

  onMessage(handler: (channel: string, payload: Uint8Array) => void): void {
    this.handler = handler;
  }

  async close(): Promise<void> {
    this.channels.clear();
  }
}
