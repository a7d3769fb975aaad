import type { Toolbox } from '../admin/toolbox.js';

/**
 * `redpoint rebase C SEQ`: lowers C's head to SEQ with every member's state (admin/rebase.ts),
 * the repair of a head that a message id or a timestamp sent as a seq raised. Exit 1 when C does
 * not exist. Through `--url` the server logs it; on a store reached directly this output is the
 * record.
 */
export async function rebaseCommand(toolbox: Toolbox, conv: string, seq: number, out: (text: string) => void): Promise<number> {
  const result = await toolbox.rebase(conv, seq);
  if (!result) {
    out(`conversation ${conv}: does not exist\n`);
    return 1;
  }
  out(
    result.before > result.head
      ? `conversation ${conv}: head lowered from ${result.before} to ${result.head}; ${result.members} members rebased (generation ${result.gen}), their clients take a snapshot\n`
      : `conversation ${conv}: head ${result.before} already at or below ${seq}; ${result.members} members rebased to it (generation ${result.gen})\n`,
  );
  return 0;
}
