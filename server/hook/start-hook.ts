import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { BadgeHookConfig } from '../config.js';
import type { Engine } from '../engine/engine.js';
import type { SyncService } from '../sync/sync-service.js';
import { BadgeDrainer } from './badge-drainer.js';
import { badgeOf } from './badge-event.js';
import { HookMetrics } from './hook-metrics.js';
import { type BadgeSink, NatsSink, WebhookSink } from './sinks.js';

export interface RunningHook {
  close(): Promise<void>;
}

/** Opens the configured sinks and starts this process's drainer (docs/badge-hook.md). */
export async function startBadgeHook(config: BadgeHookConfig, engine: Engine, sync: SyncService, registry: Registry, log: Logger): Promise<RunningHook> {
  const sinks: BadgeSink[] = [];
  if (config.webhook) sinks.push(new WebhookSink(config.webhook));
  if (config.nats) {
    const nats = await NatsSink.open(config.nats.url, config.nats.subject);
    log.info({ event: 'badge_hook_nats', mode: nats.mode, subject: config.nats.subject }, `badge hook: NATS ${nats.mode} publish`);
    sinks.push(nats);
  }
  const drainer = new BadgeDrainer(
    {
      marks: engine.badgeMarks(),
      fold: async (uid) => badgeOf(await sync.badge(uid)),
      members: async (conv) => (await engine.roster(conv))?.members.map((m) => m.uid) ?? [],
      sinks,
      metrics: new HookMetrics(registry),
      log,
    },
    {
      intervalMs: config.intervalMs,
      attempts: config.attempts,
      retryMs: config.retryMs,
      parkMs: config.parkMs,
      concurrency: config.concurrency,
      attemptTimeoutMs: config.webhook?.timeoutMs ?? 5_000,
      socketlessOnly: config.socketlessOnly,
    },
  );
  drainer.start();
  return {
    async close() {
      await drainer.stop();
      await Promise.all(sinks.map((sink) => sink.close()));
    },
  };
}
