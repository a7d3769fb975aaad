/** The bits of the DOM the client listens to, typed structurally so the SDK also builds for Node. */
interface EventSource {
  addEventListener(type: string, listener: () => void): void;
  removeEventListener(type: string, listener: () => void): void;
}

interface BrowserGlobals {
  document?: EventSource & { visibilityState?: string };
  window?: EventSource;
}

/**
 * Browsers throttle or freeze background tabs and sockets: when the page becomes visible again,
 * or the network comes back, the client re-checks at once instead of waiting for a timer. When
 * the browser says the network is gone, the client drops its socket at once: a socket on a dead
 * network can look open for minutes, and the page would go on saying "live".
 * Returns the function that stops listening (a no-op outside browsers).
 */
export function watchLifecycle(onVisible: () => void, onOnline: () => void, onOffline: () => void): () => void {
  const g = globalThis as BrowserGlobals;
  const doc = g.document;
  const win = g.window;
  if (!doc || typeof doc.addEventListener !== 'function') return () => undefined;
  const visibility = (): void => {
    if (doc.visibilityState === 'visible') onVisible();
  };
  doc.addEventListener('visibilitychange', visibility);
  win?.addEventListener('online', onOnline);
  win?.addEventListener('offline', onOffline);
  return () => {
    doc.removeEventListener('visibilitychange', visibility);
    win?.removeEventListener('online', onOnline);
    win?.removeEventListener('offline', onOffline);
  };
}
