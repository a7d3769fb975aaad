// Runs server/workers/worker.ts in a worker thread when the server runs from source (npm start,
// `node --import tsx`): tsx's loader does not reach worker threads by itself, so it is registered
// here first. The built server (dist/) starts worker.js directly and never loads this file.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
