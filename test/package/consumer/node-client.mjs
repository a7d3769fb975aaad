// A Node 20 user of the installed package (plain JavaScript, `ws` for the WebSocket):
// node node-client.mjs <ws url> <token> <json|msgpack> <cache file>
// Prints the state once synced, then marks every conversation read and prints the state once
// that is acknowledged.

import { RedpointClient } from '@redpoint/client';
import { FileCache } from '@redpoint/client/file';
import { msgpack } from '@redpoint/client/msgpack';
import WebSocket from 'ws';

const [url, token, codec, cachePath] = process.argv.slice(2);
const client = new RedpointClient({
  url,
  token: async () => token,
  WebSocket,
  cache: new FileCache(cachePath),
  lifecycle: false,
  readBatchMs: 10,
  ...(codec === 'msgpack' ? { codec: msgpack } : {}),
});
const picture = ({ status, stale, totals, conversations }) => ({ status, stale, totals, conversations });

await client.start();
await client.ready();
const before = picture(client.state);
for (const c of client.state.conversations) client.markRead(c.conv);
await new Promise((resolve) => {
  const off = client.on('change', (s) => {
    if (s.status !== 'SYNCED') return;
    off();
    resolve();
  });
});
console.log(JSON.stringify({ before, after: picture(client.state) }));
await client.stop();
