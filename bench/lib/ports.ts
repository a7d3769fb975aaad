import { createServer } from 'node:net';

/** A port the kernel considers free on 127.0.0.1 (small race until the child binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      if (!address || typeof address === 'string') {
        srv.close();
        reject(new Error('could not get a free port'));
        return;
      }
      srv.close(() => resolve(address.port));
    });
  });
}
