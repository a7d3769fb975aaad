import type { Logger } from 'pino';
import type { Authenticator } from '../auth/tokens.js';
import type { HttpRouter } from './http.js';

/** What an entry point's extra routes may use of the server they are added to. */
export interface RouteHookDeps {
  auth: Authenticator;
  /** The API key in force (in dev mode the published one), e.g. for a page that posts test messages. */
  apiKey: string;
  devMode: boolean;
  log: Logger;
}

/**
 * Extra HTTP routes an entry point adds to the server; returns the paths it registered (for the
 * 404/405 fallback). The production entry (server/main.ts) adds none: the dev entry
 * (client-demo/dev-server.ts) adds the demo page this way, so that production code never
 * imports the demo or its bundler.
 */
export type RouteHook = (router: HttpRouter, deps: RouteHookDeps) => string[];

/** A module that exports a `registerRoutes` RouteHook: how worker threads receive the hook (functions do not cross threads). */
export async function loadRouteHook(moduleUrl: string): Promise<RouteHook> {
  const module = (await import(moduleUrl)) as { registerRoutes?: unknown };
  if (typeof module.registerRoutes !== 'function') throw new Error(`${moduleUrl} exports no registerRoutes(router, deps) function`);
  return module.registerRoutes as RouteHook;
}
