import { jsonWsClient } from './json-ws.js';
import type { ConnectFn } from './types.js';

interface RawFrame {
  t: string;
  conv?: string;
  lastSeq?: number;
}

/** The raw uWS baselines' client: `?uid=` (no auth), ready at the server's `{"t":"ready"}`. */
export const rawConnector: ConnectFn = (port, uid, onPush) =>
  jsonWsClient<RawFrame>(`ws://127.0.0.1:${port}/v1/ws?uid=${encodeURIComponent(uid)}`, `raw client ${uid}`, (frame) => {
    if (frame.t === 'change' && frame.conv !== undefined && frame.lastSeq !== undefined) {
      onPush(frame.conv, frame.lastSeq);
      return 'ok';
    }
    return frame.t === 'ready' ? 'ready' : 'error';
  });
