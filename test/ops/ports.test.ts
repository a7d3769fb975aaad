import { afterAll, describe, expect, it } from 'vitest';
import { type RunningServer, startServer } from '../../server/app.js';
import { loadConfig } from '../../server/config.js';
import { freePort } from '../helpers/processes.js';
import { type ServerProcess, spawnServer } from '../helpers/server-process.js';
import { silentLogger, TEST_API_KEY, TEST_JWT_SECRET } from '../helpers/test-server.js';

/**
 * Issue 8, items 3 and 6: a port is never shared by accident (uWS's default, SO_REUSEPORT, let a
 * second server start silently on the same port and take half the connections), and the
 * operations endpoints can have a port of their own.
 */
const production = { REDPOINT_API_KEY: TEST_API_KEY, REDPOINT_JWT_SECRET: TEST_JWT_SECRET, HOST: '127.0.0.1' };

describe('ports', () => {
  const started: RunningServer[] = [];
  const processes: ServerProcess[] = [];
  afterAll(async () => {
    await Promise.all([...started.map((s) => s.close()), ...processes.map((p) => p.stop())]);
  });
  const start = async (env: Record<string, string>): Promise<RunningServer> => {
    const server = await startServer(loadConfig({ ...production, ...env }), silentLogger);
    started.push(server);
    return server;
  };

  it('a second server on a port already taken by Redpoint refuses to start; the process exits 1 and says why', async () => {
    // Two processes, as an operator would start them by mistake (the reported case).
    const first = await spawnServer({ PORT: String(await freePort()) });
    processes.push(first);
    const second = await spawnServer({ PORT: String(first.port) }, { waitListening: false });
    const outcome = await Promise.race([
      second.exited.then((exit) => ({ exit })),
      second.waitLog((l) => l.msg.startsWith('listening on')).then(() => ({ exit: 'it started, sharing the port' })),
    ]);
    await second.stop();
    expect(outcome).toEqual({ exit: { code: 1, signal: null } });
    const fatal = second.lines().find((l) => l.event === 'start_failed');
    expect(fatal?.msg).toMatch(new RegExp(`cannot start: cannot listen on 127\\.0\\.0\\.1:${first.port}: the port is taken`));
    // In-process too (tests, embedding).
    await expect(startServer(loadConfig({ ...production, PORT: String(first.port) }), silentLogger)).rejects.toThrow(/port is taken/);
    // The first one still answers every request alone.
    expect((await fetch(`http://127.0.0.1:${first.port}/healthz`)).status).toBe(200);
  });

  it('OPS_PORT: /metrics, /healthz and /readyz move to their own port; the main port answers them 404', async () => {
    const opsPort = await freePort();
    const server = await start({ PORT: '0', OPS_PORT: String(opsPort) });
    expect(server.opsPort).toBe(opsPort);
    for (const path of ['/metrics', '/healthz', '/readyz']) {
      expect((await fetch(`http://127.0.0.1:${opsPort}${path}`)).status, `${path} on OPS_PORT`).toBe(200);
      expect((await fetch(`http://127.0.0.1:${server.port}${path}`)).status, `${path} on PORT`).toBe(404);
    }
    expect((await fetch(`http://127.0.0.1:${opsPort}/v1/sync`)).status, 'the API is not on OPS_PORT').toBe(404);
    const metrics = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
    // The Node the server runs on (CI runs the suite on Node 20 and on Node 24).
    const node = process.version.replaceAll('.', '\\.');
    expect(metrics).toMatch(new RegExp(`^redpoint_build_info\\{version="\\d+\\.\\d+\\.\\d+[^"]*",node="${node}"\\} 1$`, 'm'));
  });

  it('a taken OPS_PORT is refused like a taken PORT, and the main port is released again', async () => {
    const holder = await start({ PORT: '0' });
    const port = await freePort();
    await expect(startServer(loadConfig({ ...production, PORT: String(port), OPS_PORT: String(holder.port) }), silentLogger)).rejects.toThrow(
      /OPS_PORT: cannot listen .* port is taken/,
    );
    const again = await start({ PORT: String(port) });
    expect(again.port).toBe(port);
  });

  it('OPS_PORT equal to PORT is a configuration error', () => {
    expect(() => loadConfig({ PORT: '8080', OPS_PORT: '8080' })).toThrow(/OPS_PORT must differ from PORT/);
  });
});
