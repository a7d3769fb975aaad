import { io } from 'socket.io-client';
import { CONNECT_TIMEOUT_MS, type ConnectFn, type PushClient, withTimeout } from './types.js';

interface ChangeEvent {
  conv: string;
  lastSeq: number;
}

/** socket.io-client over WebSocket only, one connection per user (forceNew: no multiplexing). */
export const socketIoConnector: ConnectFn = async (port, uid, onPush) => {
  const socket = io(`http://127.0.0.1:${port}`, {
    transports: ['websocket'],
    forceNew: true,
    reconnection: false,
    auth: { uid },
    timeout: CONNECT_TIMEOUT_MS,
  });
  let errors = 0;
  let closing = false;
  const client: PushClient = {
    get errors() {
      return errors;
    },
    close: () => {
      closing = true;
      socket.disconnect();
    },
  };
  socket.on('change', (e: ChangeEvent) => onPush(e.conv, e.lastSeq));
  const ready = new Promise<PushClient>((resolve, reject) => {
    socket.once('ready', () => resolve(client));
    socket.once('connect_error', reject);
    socket.on('disconnect', () => {
      if (!closing) errors += 1;
    });
  });
  return withTimeout(ready, CONNECT_TIMEOUT_MS, `socket.io client ${uid}`, () => socket.disconnect());
};
