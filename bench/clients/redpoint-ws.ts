import type { ServerFrame } from '../../protocol/frames.js';
import { Authenticator } from '../../server/auth/tokens.js';
import { type JsonWsClient, jsonWsClient } from './json-ws.js';
import type { ConnectFn } from './types.js';

/**
 * A Redpoint connection over `ws` with a minted token: hello (JSON text frames, so every system's
 * pushes cost the client the same JSON.parse), ready at the first `sync` reply — the server
 * subscribes the user's and large groups' topics before sending it. Every frame goes to `onFrame`;
 * an `error` frame counts as a client error.
 */
export function redpointSocket(port: number, uid: string, token: string, onFrame: (frame: ServerFrame) => void, localAddress?: string): Promise<JsonWsClient> {
  const hello = JSON.stringify({ t: 'hello', token });
  return jsonWsClient<ServerFrame>(
    `ws://127.0.0.1:${port}/v1/ws`,
    `redpoint client ${uid}`,
    (frame) => {
      onFrame(frame);
      return frame.t === 'sync' ? 'ready' : frame.t === 'error' ? 'error' : 'ok';
    },
    { onOpen: (ws) => ws.send(hello), ...(localAddress ? { localAddress } : {}) },
  );
}

/** The notify scenarios' Redpoint client: pushes are `change` and `head` frames. */
export function redpointConnector(jwtSecret: string, apiKey: string): ConnectFn {
  const auth = new Authenticator(jwtSecret, apiKey);
  return async (port, uid, onPush) =>
    redpointSocket(port, uid, await auth.mintUserToken(uid, 3600), (frame) => {
      if (frame.t === 'change' && frame.state) onPush(frame.conv, frame.state.lastSeq);
      else if (frame.t === 'head') onPush(frame.conv, frame.lastSeq);
    });
}

/** User tokens for the bench's JWT secret, minted before a timed phase (minting is not the server's cost). */
export async function mintTokens(jwtSecret: string, apiKey: string, uids: readonly string[]): Promise<Map<string, string>> {
  const auth = new Authenticator(jwtSecret, apiKey);
  const out = new Map<string, string>();
  for (const uid of uids) out.set(uid, await auth.mintUserToken(uid, 3600));
  return out;
}
