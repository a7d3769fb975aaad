import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { findOnPath, type TlsFiles } from './redis-server.js';

const run = promisify(execFile);

export const OPENSSL_NOT_FOUND = 'openssl not found on PATH: install it (apt-get install -y openssl) — the TLS tests never skip';

/**
 * A throw-away certificate authority and one server certificate it signed, for 127.0.0.1 (an IP
 * SAN: clients connect by address), made with the openssl CLI in a temp dir.
 */
export async function makeTlsFiles(): Promise<TlsFiles & { dir: string; remove(): Promise<void> }> {
  const openssl = findOnPath('openssl');
  if (!openssl) throw new Error(OPENSSL_NOT_FOUND);
  const dir = await mkdtemp(join(tmpdir(), 'redpoint-tls-'));
  const f = (name: string): string => join(dir, name);
  await run(openssl, [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=redpoint-test-ca',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.crt'),
  ]);
  await run(openssl, ['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', f('server.key'), '-out', f('server.csr')]);
  await writeFile(f('server.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n');
  await run(openssl, [
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.crt'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    f('server.crt'),
    '-extfile',
    f('server.ext'),
  ]);
  return { dir, cert: f('server.crt'), key: f('server.key'), ca: f('ca.crt'), remove: () => rm(dir, { recursive: true, force: true }) };
}
