import type { ConversationInspection, UserInspection } from '../admin/inspect.js';
import type { Toolbox } from '../admin/toolbox.js';
import { findingsReport, table } from './report.js';

const ttl = (seconds: number): string => (seconds === -2 ? 'absent' : seconds === -1 ? 'kept' : `expires in ${seconds} s`);
const counts = (t: { total: number; mentions: number; categories: Record<string, number> }): string =>
  `total ${t.total}, mentions ${t.mentions}, by category ${JSON.stringify(t.categories)}`;

/** `redpoint inspect user U`: one screen for support. */
function describeUser(u: UserInspection): string {
  let text = `user ${u.uid}${u.seen ? '' : ' (no stream: never seen, only pending records, or erased)'}\n`;
  text += `  badge now:     ${counts(u.totals.shown)}\n`;
  text += `  stored totals: ${counts(u.totals.stored)} (write-diffused conversations)\n`;
  text += `  cursor:        epoch ${u.epoch}, version ${u.version}${u.epochRotates ? ' (a new epoch at the next change: its Redis restarted)' : ''}\n`;
  text += `  stream:        base ${u.stream.base}, ${u.stream.length} entries held, ${ttl(u.stream.ttlSeconds)}; snapshot interval ${u.stream.interval}\n`;
  text += `  snapshot:      at version ${u.snapshot.version}, ${u.snapshot.present ? `${u.snapshot.conversations} conversations` : 'absent'}, ${ttl(u.snapshot.ttlSeconds)}\n`;
  if (u.conversations.length > 0) {
    const rows = [['conversation', 'status', 'mode', 'category', 'lastSeq', 'readSeq', 'unread', 'mentions', 'flags']];
    for (const c of u.conversations) {
      const flags = [c.muted ? 'muted' : '', c.markedUnread ? 'marked-unread' : '', c.hidden ? `hidden(<=${c.deletedSeq})` : ''].filter(Boolean).join(',');
      const last = c.mode === 'read' && c.lastSeq !== c.storedLastSeq ? `${c.lastSeq} (head; stored ${c.storedLastSeq})` : String(c.lastSeq);
      rows.push([c.conv, c.status, c.mode, c.category, last, String(c.readSeq), String(c.unread), String(c.mentions), flags || '-']);
    }
    text += `\n${table(rows)}`;
  }
  text += `\n${findingsReport(u.findings, 'reconcile findings (as of this instant)')}`;
  return text;
}

function describeConversation(c: ConversationInspection): string {
  let text = `conversation ${c.conv}${c.deleting ? ' (DELETION UNFINISHED: run `redpoint delete conv` again)' : ''}\n`;
  text += `  head (maxSeq): ${c.maxSeq}\n`;
  text += `  members:       ${c.memberCount}${c.storedMemberCount !== c.memberCount ? ` (stored count ${c.storedMemberCount}!)` : ''}\n`;
  text += `  mode:          ${c.mode === 'read' ? 'read diffusion (large group)' : 'write diffusion'}\n`;
  text += `  category:      ${c.category}\n`;
  text += `  generation:    ${c.gen}${c.rewrite !== 0 ? `, member rewrite of generation ${c.rewrite} pending` : ''}\n`;
  if (c.members.length > 0) {
    text += `\n${table([['member', 'joined at generation', 'join head'], ...c.members.map((m) => [m.uid, String(m.joinGen), String(m.joinHead)])])}`;
    if (c.moreMembers > 0) text += `... and ${c.moreMembers} more\n`;
  }
  return text;
}

export async function inspectCommand(toolbox: Toolbox, what: string, id: string, json: boolean, out: (text: string) => void): Promise<number> {
  if (what === 'user') {
    const u = await toolbox.inspectUser(id);
    // Not found, as `--help` says of exit 1: no stream and no record names the user.
    const found = u.seen || u.conversations.length > 0;
    out(json ? `${JSON.stringify(u, null, 2)}\n` : found ? describeUser(u) : `user ${id}: not found (never seen, or erased)\n`);
    return found ? 0 : 1;
  }
  const c = await toolbox.inspectConversation(id);
  if (!c) {
    out(json ? 'null\n' : `conversation ${id}: does not exist\n`);
    return 1;
  }
  out(json ? `${JSON.stringify(c, null, 2)}\n` : describeConversation(c));
  return 0;
}
