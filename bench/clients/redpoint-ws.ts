import WebSocket from 'ws';
import { Authenticator } from '../../server/auth/tokens.js';
import type { ServerFrame } from '../../protocol/frames.js';
import { CONNECT_TIMEOUT_MS, withTimeout, type ConnectFn, type PushClient } from './types.js';

/**
 * A Redpoint client over `ws`: hello with a JWT (JSON text frames, so every system's pushes cost
 * the client the same JSON.parse), ready at the first `sync` reply — the server subscribes the
 * user's and large groups' topics before sending it. Pushes: `change` and `head` frames.
 */
export function redpointConnector(jwtSecret: string, apiKey: string): ConnectFn {
  const auth = new Authenticator(jwtSecret, apiKey);
  return async (port, uid, onPush) => {
    const token = await auth.mintUserToken(uid, 3600);
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/ws`, { perMessageDeflate: false, skipUTF8Validation: true });
    let errors = 0;
    const client: PushClient = {
      get errors() {
        return errors;
      },
      close: () => ws.terminate(),
    };
    const ready = new Promise<PushClient>((resolve, reject) => {
      ws.once('open', () => ws.send(JSON.stringify({ t: 'hello', token })));
      ws.once('error', reject);
      ws.once('close', (code) => reject(new Error(`closed before ready (${code})`)));
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        let frame: ServerFrame;
        try {
          if (isBinary) throw new Error('binary frame after a JSON hello');
          frame = JSON.parse(data.toString()) as ServerFrame;
        } catch {
          errors += 1;
          return;
        }
        if (frame.t === 'change') {
          if (frame.state) onPush(frame.conv, frame.state.lastSeq);
        } else if (frame.t === 'head') {
          onPush(frame.conv, frame.lastSeq);
        } else if (frame.t === 'sync') {
          resolve(client);
        } else if (frame.t === 'error') {
          errors += 1;
        }
      });
    });
    return withTimeout(ready, CONNECT_TIMEOUT_MS, `redpoint client ${uid}`, () => ws.terminate());
  };
}
