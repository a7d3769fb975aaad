import { describe, expect, it } from 'vitest';
import { runOf } from '../../server/engine/redis/runs.js';

/**
 * The run id a user's epoch is tied to (runs.ts): a Redis run AND its replication history. The
 * fail-back it exists for, on real Sentinels, is in redis-sentinel.test.ts.
 */
const info = (runId: string, replid: string): string =>
  `# Server\r\nredis_version:7.0.15\r\nrun_id:${runId}\r\ntcp_port:6379\r\n\n# Replication\r\nrole:master\r\nconnected_slaves:1\r\nmaster_replid:${replid}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n`;
const RUN = 'a'.repeat(40);
const REPLID = '1'.repeat(40);

describe('runOf', () => {
  it('is 40 hex characters (the size of a run id: stored in every user meta) and the same for the same INFO', () => {
    expect(runOf(info(RUN, REPLID))).toMatch(/^[0-9a-f]{40}$/);
    expect(runOf(info(RUN, REPLID))).toBe(runOf(info(RUN, REPLID)));
  });

  it('changes with the replication id alone: a master failed over and back keeps its run_id but not its history', () => {
    expect(runOf(info(RUN, '2'.repeat(40)))).not.toBe(runOf(info(RUN, REPLID)));
  });

  it('changes with the run id alone: a restart', () => {
    expect(runOf(info('b'.repeat(40), REPLID))).not.toBe(runOf(info(RUN, REPLID)));
  });

  it('is not the bare run id or replication id, nor either joined without a separator', () => {
    const id = runOf(info(RUN, REPLID));
    expect([RUN, REPLID]).not.toContain(id);
    // `run:replid` hashed: moving characters between the two fields gives another run.
    expect(runOf(info(`${RUN}1`, REPLID.slice(1)))).not.toBe(id);
  });

  it('reads the fields only at the start of their own lines (master_replid2 and run_id-like text elsewhere do not count)', () => {
    const decoy = `# Other\r\nx_run_id:${'c'.repeat(40)}\r\nx_master_replid:${'3'.repeat(40)}\r\n${info(RUN, REPLID)}`;
    expect(runOf(decoy)).toBe(runOf(info(RUN, REPLID)));
    // Without its master_replid line, master_replid2 is not taken for it.
    expect(() => runOf(info(RUN, REPLID).replace(/^master_replid:.*$/m, ''))).toThrow('master_replid');
  });

  it('reads lines ended by LF alone as by CRLF, and refuses a field with more than hex digits on its line', () => {
    expect(runOf(info(RUN, REPLID).replace(/\r\n/g, '\n'))).toBe(runOf(info(RUN, REPLID)));
    expect(() => runOf(info(`${RUN}x`, REPLID))).toThrow('run_id');
    expect(() => runOf(info(RUN, `${REPLID}x`))).toThrow('master_replid');
  });

  it('refuses an INFO without a run_id or a master_replid, rather than tie epochs to a partial run', () => {
    expect(() => runOf(info(RUN, REPLID).replace(/^run_id:.*$/m, ''))).toThrow('run_id');
    expect(() => runOf(info(RUN, REPLID).replace(/^master_replid:.*$/m, ''))).toThrow('master_replid');
    expect(() => runOf(info('', REPLID))).toThrow('run_id');
    expect(() => runOf(info(RUN, ''))).toThrow('master_replid');
  });
});
