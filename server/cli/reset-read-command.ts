import type { Toolbox } from '../admin/toolbox.js';
import { HttpError } from './http-toolbox.js';

/**
 * `redpoint reset-read U C [SEQ]`: lowers U's read position in C to SEQ (default: C's head now),
 * the undo of a read that went too far. Exit 1 when U is not a member of C, or C does not exist.
 * Through `--url` the server logs and counts it (redpoint_read_resets_total); on a store reached
 * directly this output is the record.
 */
export async function resetReadCommand(toolbox: Toolbox, uid: string, conv: string, seq: number | undefined, out: (text: string) => void): Promise<number> {
  let result: Awaited<ReturnType<Toolbox['resetRead']>>;
  try {
    result = await toolbox.resetRead(uid, conv, seq);
  } catch (err) {
    const code = err instanceof HttpError ? err.code : err instanceof Error && 'code' in err ? String(err.code) : '';
    if (code === 'not_a_member') {
      out(`${uid} in ${conv}: ${uid} is not a member of ${conv}\n`);
      return 1;
    }
    if (code !== 'unknown_conversation') throw err;
    out(`${uid} in ${conv}: no such conversation\n`);
    return 1;
  }
  const readSeq = result.state?.readSeq;
  const target = seq === undefined ? 'the head' : `seq ${seq}`;
  out(
    result.changed
      ? `${uid} in ${conv}: read position lowered to ${readSeq} (${target}); unread ${Math.max(0, (result.state?.lastSeq ?? 0) - (readSeq ?? 0))}, stream version ${result.version}\n`
      : `${uid} in ${conv}: unchanged, read position already at ${readSeq} (at or below ${target}, or held by a delete)\n`,
  );
  return 0;
}
