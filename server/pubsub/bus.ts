/**
 * Carries notifications to the OTHER server processes of a deployment (this process delivers to
 * its own sockets directly, without encoding). Channels are subscribed only while a local
 * connection needs them (a user online here, a large group with members online here), so a
 * process never receives traffic for users it does not serve. `publish` never waits for the
 * store; a lost notification is repaired by pulls. A single process (the memory engine) has no
 * bus at all.
 */
export interface Bus {
  publish(channel: string, payload: Uint8Array): void;
  /** Resolves once messages published on the channel anywhere will reach this process. */
  subscribe(channel: string): Promise<void>;
  unsubscribe(channel: string): void;
  onMessage(handler: (channel: string, payload: Uint8Array) => void): void;
  close(): Promise<void>;
}
