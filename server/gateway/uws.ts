import { createRequire } from 'node:module';
import type * as UwsModule from 'uWebSockets.js';

/**
 * Loads the native uWebSockets.js binary directly. The package's own entry point silently falls
 * back to a slow `ws`-based shim when the binary does not load (or when UWS_USE_FALLBACK is set);
 * Redpoint refuses to run on that shim, so a broken install fails loudly at start instead of
 * serving at a fraction of the speed.
 */
function loadNative(): typeof UwsModule {
  const require = createRequire(import.meta.url);
  const binary = `uWebSockets.js/binaries/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  try {
    return require(binary) as typeof UwsModule;
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(
      `uWebSockets.js native binary failed to load (${binary}): ${reason}\n` +
        'Redpoint does not run on the slow fallback. Use Node.js 20 on Linux/macOS x64/arm64 with glibc >= 2.28, and reinstall with npm ci.',
    );
  }
}

export const uws = loadNative();

/** The native App has `close()` (closes every socket, listen sockets included); the typings lack it. */
export function closeApp(app: UwsModule.TemplatedApp): void {
  (app as UwsModule.TemplatedApp & { close(): void }).close();
}
export type { HttpRequest, HttpResponse, TemplatedApp, WebSocket, us_listen_socket } from 'uWebSockets.js';
