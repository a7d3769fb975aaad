/** Called for every push a client receives: the conversation and the lastSeq it announces. */
export type PushSink = (conv: string, lastSeq: number) => void;

export interface PushClient {
  /** Frames the client could not read (errors, unknown types). */
  readonly errors: number;
  close(): void;
}

/** Connects one user and resolves once the server will deliver that user's pushes to it. */
export type ConnectFn = (port: number, uid: string, onPush: PushSink) => Promise<PushClient>;

export const CONNECT_TIMEOUT_MS = 15_000;

/** Rejects `promise` after `ms`, running `onTimeout` (to close the half-open client). */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string, onTimeout: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      onTimeout();
      reject(new Error(`${what}: not ready within ${ms} ms`));
    }, ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}
