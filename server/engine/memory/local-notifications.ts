import { type HeadChange, InterestCounter, type NotificationHandler, type Notifications, type ReadsChange, type UserChange } from '../notifications.js';

/**
 * The memory engine's change feed: one process, so a change is handed to the handler
 * synchronously, inside the call that made it — in version order by construction.
 */
export class LocalNotifications implements Notifications {
  private handler: NotificationHandler | undefined;
  private readonly users = new InterestCounter();
  private readonly convs = new InterestCounter();

  async followUser(uid: string): Promise<void> {
    this.users.add(uid);
  }

  unfollowUser(uid: string): void {
    this.users.remove(uid);
  }

  async followConversation(conv: string): Promise<void> {
    this.convs.add(conv);
  }

  unfollowConversation(conv: string): void {
    this.convs.remove(conv);
  }

  setHandler(handler: NotificationHandler): void {
    this.handler = handler;
  }

  user(changes: readonly UserChange[]): void {
    const first = changes[0];
    if (first && this.users.has(first.uid)) this.handler?.userChanged(changes);
  }

  head(change: HeadChange): void {
    if (this.convs.has(change.conv)) this.handler?.headChanged(change);
  }

  reads(change: ReadsChange): void {
    if (this.users.has(change.uid)) this.handler?.readsChanged?.(change);
  }
}
