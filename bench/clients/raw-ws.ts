import WebSocket from 'ws';
import { CONNECT_TIMEOUT_MS, withTimeout, type ConnectFn, type PushClient } from './types.js';

interface RawFrame {
  t: string;
  conv?: string;
  lastSeq?: number;
}

/** The raw uWS baselines' client: `?uid=` (no auth), ready at the server's `{"t":"ready"}`. */
export const rawConnector: ConnectFn = async (port, uid, onPush) => {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/ws?uid=${encodeURIComponent(uid)}`, { perMessageDeflate: false, skipUTF8Validation: true });
  let errors = 0;
  const client: PushClient = {
    get errors() {
      return errors;
    },
    close: () => ws.terminate(),
  };
  const ready = new Promise<PushClient>((resolve, reject) => {
    ws.once('error', reject);
    ws.once('close', (code) => reject(new Error(`closed before ready (${code})`)));
    ws.on('message', (data: Buffer) => {
      let frame: RawFrame;
      try {
        frame = JSON.parse(data.toString()) as RawFrame;
      } catch {
        errors += 1;
        return;
      }
      if (frame.t === 'change' && frame.conv !== undefined && frame.lastSeq !== undefined) onPush(frame.conv, frame.lastSeq);
      else if (frame.t === 'ready') resolve(client);
      else errors += 1;
    });
  });
  return withTimeout(ready, CONNECT_TIMEOUT_MS, `raw client ${uid}`, () => ws.terminate());
};
