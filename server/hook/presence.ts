import { nanoid } from 'nanoid';
import type { Logger } from 'pino';
import type { BadgeMarks } from '../engine/badge-marks.js';

/** How often a process refreshes its users' presence entries, and how long one lasts without a refresh. */
const REFRESH_MS = 10_000;
const LIVE_FOR_MS = 30_000;

/** What the presence needs of the WebSocket gateway (gateway/ws-gateway.ts). */
export interface SocketRegistry {
  presence: { online(uid: string): void; offline(uid: string): void } | undefined;
  liveUsers(): string[];
}

/**
 * BADGE_HOOK_SOCKETLESS_ONLY: tells the store which users this process holds a live socket of
 * (engine/badge-marks.ts setPresence), so every process's drainer can skip them. Each process
 * (each worker) has its own entry per user: its first socket of a user writes it, a refresh every
 * REFRESH_MS keeps it LIVE_FOR_MS ahead, its last socket's close removes it and marks the user
 * (what changed meanwhile is delivered then). A process that dies stops refreshing: its entries
 * lapse within LIVE_FOR_MS, and the marks the drainer put off to then come due.
 */
export class SocketPresence {
  private readonly process = nanoid(10);
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly marks: BadgeMarks,
    private readonly sockets: SocketRegistry,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.sockets.presence = {
      online: (uid) => this.write([uid], Date.now() + LIVE_FOR_MS),
      offline: (uid) => this.write([uid], null),
    };
    this.timer = setInterval(() => {
      const live = this.sockets.liveUsers();
      if (live.length > 0) this.write(live, Date.now() + LIVE_FOR_MS);
    }, REFRESH_MS);
  }

  stop(): void {
    clearInterval(this.timer);
    this.sockets.presence = undefined;
  }

  private write(uids: string[], until: number | null): void {
    this.marks.setPresence(this.process, uids, until, Date.now()).catch((err: unknown) => {
      // A lost write is repaired by the next refresh (or lapses: the user is then socket-less).
      this.log.warn({ event: 'badge_hook_presence_failed', err }, 'badge hook: writing socket presence failed');
    });
  }
}
