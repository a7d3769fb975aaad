import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../bench/lib/child-server.js';

const run = promisify(execFile);

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** scripts/test-tools.sh (npm test's pretest) with only the variables given. */
async function testTools(env: Record<string, string>, args: string[] = []): Promise<Result> {
  try {
    const { stdout, stderr } = await run('/bin/bash', ['scripts/test-tools.sh', ...args], {
      cwd: PROJECT_ROOT,
      env: { HOME: '/tmp', ...env },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/**
 * The README's test command on a fresh machine: npm test's first step names what the suites need
 * and the machine lacks, and installs it only with consent. Run here where the tools are
 * installed (npm test's own first step saw to that), and with a PATH that hides those found on it.
 */
describe('npm test: the test tools step', () => {
  it('with everything installed it says nothing and passes', async () => {
    expect(await testTools({ PATH: process.env.PATH ?? '/usr/bin:/bin' })).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it('without consent it names what is missing, prints the apt command, installs nothing, and stops (exit 1)', async () => {
    // Hides everything found through PATH; chromium and initdb are looked for by path.
    const result = await testTools({ PATH: '/nonexistent' });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/not installed: redis-server redis-cli promtool/);
    expect(result.stderr).toContain('apt-get install -y redis-server redis-tools');
    expect(result.stderr).toContain('apt-get install -y --no-install-recommends prometheus');
    expect(result.stderr).toContain('REDPOINT_INSTALL_TEST_TOOLS=1 npm test');
    expect(result.stdout).not.toContain('installing');
  });

  it('--packages names the Debian package of every tool (the Node 24 root installs them), and checks nothing', async () => {
    // Even where every tool is missing and consent is given: it only lists.
    const result = await testTools({ PATH: '/nonexistent', REDPOINT_INSTALL_TEST_TOOLS: '1' }, ['--packages']);
    expect(result).toEqual({ code: 0, stdout: 'redis-server redis-tools chromium prometheus postgresql nats-server openssl\n', stderr: '' });
  });
});
