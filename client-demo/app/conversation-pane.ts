import type { ConversationView } from '@redpoint/client';
import type { DemoKeptMessage } from '../../protocol/replies.js';
import { actions, avatar, LEVELS, type ListContext, levelOf, recalledSeqs } from './chat-list.js';
import { h, ICONS, icon } from './dom.js';
import { CATEGORY_LABELS, rowName } from './names.js';
import { clockTime, lastActive } from './time-ago.js';

/**
 * The open conversation. Redpoint does not store messages: it counts them. So the view shows
 * what it knows (the seq range, the read position, unread and mentions) and, as messages, what
 * the demo's test tools sent (the dev entry keeps those); a seq sent some other way shows as a gap.
 */

export interface OpenConversation {
  conv: string;
  /** The read position when it was opened: what came after it is under the "new" divider. */
  readAtOpen: number;
}

function facts(c: ConversationView): HTMLElement {
  const range = c.lastSeq > 0 ? `#1–#${c.lastSeq}` : 'no messages yet';
  const readState = c.lastSeq > 0 ? `Read up to #${c.readSeq} of ${range}` : 'No messages yet';
  return h(
    'div',
    { class: 'facts', 'data-role': 'facts' },
    h('span', { class: 'fact', 'data-role': 'read-state' }, readState),
    h('span', { class: `fact${c.unread > 0 ? ' hot' : ''}`, 'data-role': 'fact-unread' }, `${c.unread} unread`),
    c.mentions > 0 ? h('span', { class: 'fact hot', 'data-role': 'fact-mentions' }, `@ ${c.mentions} mention${c.mentions === 1 ? '' : 's'}`) : null,
    c.markedUnread ? h('span', { class: 'fact', 'data-role': 'fact-marked' }, 'Marked unread') : null,
    c.muted ? h('span', { class: 'fact', 'data-role': 'fact-muted' }, 'Muted') : null,
    levelOf(c) === 'mentions' ? h('span', { class: 'fact', 'data-role': 'fact-level' }, LEVELS[1]?.label ?? 'Mentions only') : null,
  );
}

/** A message that counts: not a reaction or a recall's notice (`counts: false`), not recalled. */
const counting = (m: DemoKeptMessage, recalled: ReadonlySet<number>): boolean => m.kind !== 'reaction' && m.kind !== 'recall' && !recalled.has(m.seq);

function messages(c: ConversationView, open: OpenConversation, ctx: ListContext): HTMLElement {
  const sent = ctx.messages(c.conv).filter((m) => m.seq <= c.lastSeq);
  const recalled = recalledSeqs(sent);
  const list = h('ol', { class: 'messages', 'data-role': 'messages' });
  const unseen = sent.filter((m) => m.seq > open.readAtOpen && counting(m, recalled)).length;
  let divided = false;
  for (const m of sent) {
    if (!divided && m.seq > open.readAtOpen && unseen > 0) {
      divided = true;
      list.append(h('li', { class: 'new-divider', 'data-role': 'new-divider' }, `${unseen} new message${unseen === 1 ? '' : 's'}`));
    }
    list.append(m.kind === 'reaction' || m.kind === 'recall' ? notice(m, ctx) : bubble(c, m, recalled.has(m.seq), ctx));
  }
  if (sent.length === 0) {
    list.append(
      h('li', { class: 'msg-empty' }, c.lastSeq > 0 ? 'These messages were not sent from this demo, so it has no text for them.' : 'No messages yet.'),
    );
  }
  return list;
}

/** A reaction or a recall: a line of its own, as messengers show them (it moved the chat up, it adds no unread). */
function notice(m: DemoKeptMessage, ctx: ListContext): HTMLElement {
  const who = m.sender === ctx.uid ? 'You' : m.sender;
  const what = m.kind === 'reaction' ? `${who} reacted ${m.text}` : `${who} recalled a message`;
  return h(
    'li',
    { class: 'msg-notice', 'data-role': 'notice', 'data-kind': m.kind, 'data-seq': String(m.seq) },
    `${what} · #${m.seq} · ${clockTime(m.at)} · not counted`,
  );
}

function bubble(c: ConversationView, m: DemoKeptMessage, recalled: boolean, ctx: ListContext): HTMLElement {
  const mine = m.sender === ctx.uid;
  const mentionsMe = m.mention || (m.kind === 'all' && !mine);
  const tag = m.kind === 'all' ? '@all ' : m.mention ? `@${ctx.uid} ` : '';
  return h(
    'li',
    {
      class: `msg${mine ? ' mine' : ''}${mentionsMe && !recalled ? ' is-mention' : ''}${recalled ? ' is-recalled' : ''}`,
      'data-role': 'message',
      'data-seq': String(m.seq),
      'data-read': String(m.seq <= c.readSeq),
      'data-mention': String(m.mention),
      'data-kind': m.kind ?? 'message',
      'data-recalled': String(recalled),
    },
    mine ? null : h('span', { class: 'msg-sender' }, m.sender),
    recalled
      ? h('span', { class: 'msg-text recalled' }, 'Message recalled')
      : h('span', { class: 'msg-text' }, tag ? h('span', { class: 'at' }, tag) : null, m.text),
    h('span', { class: 'msg-meta', title: new Date(m.at).toLocaleString() }, `#${m.seq} · ${clockTime(m.at)}`, mine ? receipt(c.conv, m.seq, ctx) : null),
    h(
      'span',
      { class: 'msg-actions' },
      // Your own message: take it back for everyone (its unread goes from every member who had not read it).
      mine && !recalled ? msgButton(c.conv, m.seq, 'recall', 'Recall', `Recall message #${m.seq} for everyone`) : null,
      // Someone else's: a reaction moves the chat up for its members, and counts for nobody.
      !mine && !recalled ? msgButton(c.conv, m.seq, 'react', 'React 👍', `React 👍 to message #${m.seq}`) : null,
      // "Unread from here": this message and every later one unread again, on every device.
      m.seq <= c.readSeq ? msgButton(c.conv, m.seq, 'unread-from', 'Mark unread from here', `Mark unread from message #${m.seq}`) : null,
    ),
  );
}

function msgButton(conv: string, seq: number, action: string, label: string, aria: string): HTMLElement {
  return h(
    'button',
    { class: `msg-btn msg-${action}`, type: 'button', 'data-action': action, 'data-conv': conv, 'data-seq': String(seq), title: aria, 'aria-label': aria },
    label,
  );
}

/**
 * Read receipts on one's own message: ✓ sent; ✓✓ once a one-to-one peer's read position reached
 * it; "read by N" in a group once anyone has (as pushed: groups of up to 30).
 */
function receipt(conv: string, seq: number, ctx: ListContext): HTMLElement {
  const peer = ctx.peerRead(conv);
  if (peer !== undefined && peer >= seq) return h('span', { class: 'receipt read', 'data-role': 'receipt', 'data-receipt': 'read', title: 'Read' }, ' ✓✓');
  const n = peer === undefined ? ctx.readBy(conv, seq) : 0;
  if (n > 0) return h('span', { class: 'receipt read', 'data-role': 'receipt', 'data-receipt': `read-by-${n}` }, ` ✓ · read by ${n}`);
  return h('span', { class: 'receipt', 'data-role': 'receipt', 'data-receipt': 'sent', title: 'Sent' }, ' ✓');
}

export function conversationPane(c: ConversationView, open: OpenConversation, ctx: ListContext): HTMLElement[] {
  const name = rowName(c, ctx.uid);
  const [trigger, menu] = ctx.menus.render(`pane:${c.conv}`, c.conv, name, actions(c));
  const at = ctx.at(c.conv);
  const kind = CATEGORY_LABELS[c.category] ?? c.category;
  return [
    h(
      'header',
      { class: 'pane-head' },
      h('button', { class: 'icon-btn back', type: 'button', 'data-action': 'back', 'aria-label': 'Back to chats' }, icon(ICONS.back)),
      avatar(name),
      h(
        'div',
        { class: 'pane-title' },
        h('h2', { 'data-role': 'title' }, name),
        h('span', { class: 'pane-sub' }, `${c.topic !== undefined ? 'Topic · ' : ''}${at === undefined ? kind : `${kind} · ${lastActive(at, ctx.now)}`}`),
      ),
      h('div', { class: 'pane-menu' }, trigger, menu),
    ),
    facts(c),
    messages(c, open, ctx),
    h(
      'p',
      { class: 'pane-note' },
      'Redpoint counts messages and read positions; it does not store messages. The texts above are what this demo’s test tools sent.',
    ),
  ];
}
