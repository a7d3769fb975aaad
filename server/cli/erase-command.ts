import type { Toolbox } from '../admin/toolbox.js';

/** `redpoint erase user U`: erase, scanning every conversation, then verify that nothing names the user. */
export async function eraseCommand(toolbox: Toolbox, uid: string, scan: boolean, out: (text: string) => void): Promise<number> {
  const result = await toolbox.eraseUser(uid, { scan });
  let text = `erased user ${uid}: removed from ${result.conversations.length} conversation(s)${result.conversations.length > 0 ? ` (${result.conversations.join(', ')})` : ''}\n`;
  if (result.foundByScan.length > 0) text += `  of which found only by the scan (an add that never reached the user): ${result.foundByScan.join(', ')}\n`;
  const left = await toolbox.traces(uid);
  if (!left.state && left.listedIn.length === 0) {
    out(`${text}verified: nothing in the store names ${uid}\n`);
    return 0;
  }
  text += `NOT clean: ${left.state ? 'the user has state again' : ''}${left.listedIn.length > 0 ? ` listed in ${left.listedIn.join(', ')}` : ''}\n`;
  text += '(a membership change that added the user after the erase makes it exist again; erase again to forget it)\n';
  out(text);
  return 1;
}

export async function deleteCommand(toolbox: Toolbox, conv: string, out: (text: string) => void): Promise<number> {
  const result = await toolbox.deleteConversation(conv);
  if (!result) {
    out(`conversation ${conv}: nothing to delete (it does not exist, or an earlier attempt finished)\n`);
    return 1;
  }
  out(`deleted conversation ${conv} for all ${result.members} member(s)\n`);
  return 0;
}

export async function headCommand(toolbox: Toolbox, conv: string, maxSeq: number, out: (text: string) => void): Promise<number> {
  const result = await toolbox.reassertHeads([{ conv, maxSeq }]);
  const head = result.heads[0];
  if (!head) {
    out(`conversation ${conv}: does not exist\n`);
    return 1;
  }
  out(`conversation ${conv}: head ${head.maxSeq}\n`);
  return 0;
}
