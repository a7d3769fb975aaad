import { type ChannelConstructor, type LockManagerLike, TabGroup } from './tabs/group.js';
import type { TransportFactory } from './transport.js';

export interface ShareTabsOptions {
  /**
   * Tabs with the same key share one socket: use one per signed-in user (e.g. `user:${uid}`). The
   * socket is authenticated by the leader tab's token, so two users must never share a key.
   */
  key: string;
}

/** One group per key in this tab, shared by the clients of this tab that use the key. */
const groups = new Map<string, TabGroup>();

/**
 * One WebSocket per browser instead of one per tab: `new RedpointClient({ transport:
 * shareTabs({ key: `user:${uid}` }), ... })`. The tab holding a Web Lock leads and owns the socket;
 * the other tabs' clients talk through it over a BroadcastChannel and get the same frames, so
 * every tab shows the same counts and sends its reads through the leader. When the leader's tab
 * closes, the next tab takes the lock and the socket at once. Where Web Locks or BroadcastChannel
 * are missing (Node, an insecure origin), each client keeps its own socket.
 */
export function shareTabs(options: ShareTabsOptions): TransportFactory {
  return (context) => {
    const g = globalThis as unknown as {
      navigator?: { locks?: LockManagerLike };
      BroadcastChannel?: ChannelConstructor;
      addEventListener?: (type: string, listener: () => void) => void;
    };
    const locks = g.navigator?.locks;
    const Channel = g.BroadcastChannel;
    if (!locks || !Channel) return context.direct;
    let group = groups.get(options.key);
    if (!group) {
      const created = new TabGroup(options.key, context.direct, locks, Channel);
      g.addEventListener?.('pagehide', () => created.leave());
      groups.set(options.key, created);
      group = created;
    }
    const shared = group;
    return (events) => shared.open(events);
  };
}
