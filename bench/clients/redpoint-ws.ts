import { Authenticator } from '../../server/auth/tokens.js';
import type { ServerFrame } from '../../protocol/frames.js';
import { jsonWsClient } from './json-ws.js';
import type { ConnectFn } from './types.js';

/**
 * A Redpoint client over `ws`: hello with a JWT (JSON text frames, so every system's pushes cost
 * the client the same JSON.parse), ready at the first `sync` reply — the server subscribes the
 * user's and large groups' topics before sending it. Pushes: `change` and `head` frames.
 */
export function redpointConnector(jwtSecret: string, apiKey: string): ConnectFn {
  const auth = new Authenticator(jwtSecret, apiKey);
  return async (port, uid, onPush) => {
    const token = await auth.mintUserToken(uid, 3600);
    const hello = JSON.stringify({ t: 'hello', token });
    return jsonWsClient<ServerFrame>(
      `ws://127.0.0.1:${port}/v1/ws`,
      `redpoint client ${uid}`,
      (frame) => {
        switch (frame.t) {
          case 'change':
            if (frame.state) onPush(frame.conv, frame.state.lastSeq);
            return 'ok';
          case 'head':
            onPush(frame.conv, frame.lastSeq);
            return 'ok';
          case 'sync':
            return 'ready';
          case 'error':
            return 'error';
          default:
            return 'ok';
        }
      },
      (ws) => ws.send(hello),
    );
  };
}
