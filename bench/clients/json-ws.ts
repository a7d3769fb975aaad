import WebSocket from 'ws';
import { CONNECT_TIMEOUT_MS, type PushClient, withTimeout } from './types.js';

/** What a client makes of one frame: read (a push, or nothing it needs), the connection is ready, or unreadable. */
export type FrameOutcome = 'ok' | 'ready' | 'error';

/** A client that can also send frames (JSON text). */
export interface JsonWsClient extends PushClient {
  send(frame: unknown): void;
}

export interface JsonWsOptions {
  /** Sent once the socket opens (a hello). */
  onOpen?: (ws: WebSocket) => void;
  /**
   * Source address on 127/8: one address has ~28k ephemeral ports, so tens of thousands of
   * clients spread over several loopback addresses.
   */
  localAddress?: string;
}

/**
 * A `ws` client reading JSON text frames, as the raw uWS baselines' and Redpoint's clients both
 * are: no compression and no UTF-8 check, so a push costs every system's client the same
 * JSON.parse. Each frame goes to `onFrame`; a binary frame, a frame that does not parse and one
 * `onFrame` calls an error count in `errors`. Resolves once `onFrame` says 'ready'.
 */
export function jsonWsClient<F>(url: string, what: string, onFrame: (frame: F) => FrameOutcome, options: JsonWsOptions = {}): Promise<JsonWsClient> {
  const ws = new WebSocket(url, {
    perMessageDeflate: false,
    skipUTF8Validation: true,
    ...(options.localAddress ? { localAddress: options.localAddress } : {}),
  });
  let errors = 0;
  const client: JsonWsClient = {
    get errors() {
      return errors;
    },
    close: () => ws.terminate(),
    send: (frame) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
    },
  };
  const ready = new Promise<JsonWsClient>((resolve, reject) => {
    const { onOpen } = options;
    if (onOpen) ws.once('open', () => onOpen(ws));
    ws.once('error', reject);
    ws.once('close', (code) => reject(new Error(`closed before ready (${code})`)));
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      let frame: F;
      try {
        if (isBinary) throw new Error('a binary frame');
        frame = JSON.parse(data.toString()) as F;
      } catch {
        errors += 1;
        return;
      }
      const outcome = onFrame(frame);
      if (outcome === 'error') errors += 1;
      else if (outcome === 'ready') resolve(client);
    });
  });
  return withTimeout(ready, CONNECT_TIMEOUT_MS, what, () => ws.terminate());
}
