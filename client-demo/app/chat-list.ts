import { type ConversationGroup, type ConversationView, childLabel } from '@redpoint/client';
import type { DemoKeptMessage } from '../../protocol/replies.js';
import type { NotificationLevel } from '../../protocol/types.js';
import { count, h, ICONS, icon } from './dom.js';
import type { MenuItem, Menus } from './menu.js';
import { CATEGORY_LABELS, colorOf, displayName, initials } from './names.js';
import { timeAgo } from './time-ago.js';

/**
 * The chat list, as a messenger draws it: one entry per conversation; a conversation with topics
 * shows their summed count and its topic rows indented under it, each opened (and read) alone.
 */

export interface ListContext {
  uid: string;
  now: number;
  open: string | null;
  menus: Menus;
  at(conv: string): number | undefined;
  /** When a conversation with topics was last active: its newest row's time. */
  entryAt(group: ConversationGroup): number | undefined;
  messages(conv: string): readonly DemoKeptMessage[];
  /** Read receipts: the one-to-one peer's read position (SDK peerRead). */
  peerRead(conv: string): number | undefined;
  /** Read receipts: how many others read `seq` (SDK readBy). */
  readBy(conv: string, seq: number): number;
}

/** The notification level a view stands for (PROTOCOL.md "Notification levels": `muted` is 'none'). */
export function levelOf(c: ConversationView): NotificationLevel {
  if (c.muted) return 'none';
  return c.level === 'mentions' ? 'mentions' : 'all';
}

/** The levels as the menu offers them. */
export const LEVELS: ReadonlyArray<{ level: NotificationLevel; label: string }> = [
  { level: 'all', label: 'All' },
  { level: 'mentions', label: 'Mentions only' },
  { level: 'none', label: 'None (muted)' },
];

/**
 * A row's actions (and the open conversation's): one toggle for read, the notification level,
 * delete. A conversation listed with its topics (`group`) reads them all, as a forum's entry does;
 * the rest acts on its own row.
 */
export function actions(c: ConversationView, group?: ConversationGroup): MenuItem[] {
  const unreadish = c.unread > 0 || c.markedUnread;
  const current = levelOf(c);
  const read: MenuItem =
    group && (group.unread > 0 || group.markedUnread)
      ? { action: 'read-all', label: 'Mark all as read' }
      : unreadish
        ? { action: 'read', label: 'Mark as read' }
        : { action: 'mark-unread', label: 'Mark as unread' };
  return [
    read,
    ...LEVELS.map(
      ({ level, label }, i): MenuItem => ({
        action: 'level',
        label,
        choice: { value: level, checked: level === current },
        ...(i === 0 ? { heading: 'Notify me about' } : {}),
      }),
    ),
    { action: 'delete', label: 'Delete', danger: true },
  ];
}

/** A pill that does not reach the badge (muted; or mentions only, where only the @ does) is grey. */
const countsInBadge = (c: ConversationView): boolean => levelOf(c) === 'all';

/** What a row's marks and subtitle show: its own row's numbers, or a conversation's summed over its topics. */
type Shown = Pick<ConversationView, 'unread' | 'mentions' | 'markedUnread'>;

/** The marks on the right of a row: the mentions (@), the number, or the "marked unread" dot; grey when none of it reaches the badge. */
function marks(c: Shown, inBadge: boolean): HTMLElement {
  const box = h('span', { class: 'marks' });
  if (c.mentions > 0) {
    box.append(
      h('span', { class: 'mention', 'data-role': 'mention', title: `${c.mentions} mention${c.mentions === 1 ? '' : 's'} of you` }, `@${count(c.mentions)}`),
    );
  }
  const grey = inBadge ? '' : ' muted';
  if (c.unread > 0) box.append(h('span', { class: `pill${grey}`, 'data-role': 'unread' }, count(c.unread)));
  else if (c.markedUnread) box.append(h('span', { class: `dot${grey}`, 'data-role': 'marked', title: 'Marked as unread' }));
  return box;
}

/**
 * The line under the name: the last message when the test tools sent it (who and what), else
 * what Redpoint knows (what is new, or that nothing is).
 */
function subtitle(c: ConversationView, shown: Shown, ctx: ListContext): string {
  const sent = ctx.messages(c.conv);
  const last = sent.at(-1);
  if (last && last.seq === c.lastSeq) {
    // A private chat is named after the other person already: only your own lines say who.
    const who = last.sender === ctx.uid ? 'You' : c.category === 'private' ? '' : last.sender;
    // A reaction or a recall says what happened, not a line of chat.
    if (last.kind === 'reaction' || last.kind === 'recall')
      return `${who || last.sender} ${last.kind === 'reaction' ? `reacted ${last.text}` : 'recalled a message'}`;
    const text = recalledSeqs(sent).has(last.seq) ? 'Message recalled' : `${last.kind === 'all' ? '@all ' : ''}${last.text}`;
    return who ? `${who}: ${text}` : text;
  }
  const kind = CATEGORY_LABELS[c.category] ?? c.category;
  let news: string;
  if (shown.mentions > 0) news = `${shown.mentions === 1 ? 'You were mentioned' : `${shown.mentions} mentions of you`} · ${shown.unread} new`;
  else if (shown.unread > 0) news = `${shown.unread} new message${shown.unread === 1 ? '' : 's'}`;
  else if (shown.markedUnread) news = 'Marked as unread';
  else news = 'No new messages';
  return `${kind} · ${news}`;
}

/** The level beside the name: a crossed speaker when muted, an @ when only mentions notify; nothing for 'all'. */
function levelMark(c: ConversationView): HTMLElement | null {
  const level = levelOf(c);
  if (level === 'none')
    return h(
      'span',
      { class: 'muted-icon', 'data-role': 'muted', 'data-level': level, title: 'Muted' },
      icon(ICONS.muted),
      h('span', { class: 'sr-only' }, 'muted'),
    );
  if (level === 'mentions') {
    const title = 'Mentions only: only @-mentions reach the badge';
    return h(
      'span',
      { class: 'muted-icon level-mentions', 'data-role': 'level', 'data-level': level, title },
      icon(ICONS.bell),
      h('span', { class: 'level-at', 'aria-hidden': 'true' }, '@'),
      h('span', { class: 'sr-only' }, 'mentions only'),
    );
  }
  return null;
}

/** The seqs the kept messages recall (a recall is a message of its own naming the one it takes back). */
export function recalledSeqs(messages: readonly DemoKeptMessage[]): Set<number> {
  return new Set(messages.flatMap((m) => (m.recalls !== undefined ? [m.recalls] : [])));
}

export function avatar(name: string): HTMLElement {
  return h('span', { class: 'avatar', 'aria-hidden': 'true', style: `background:${colorOf(name)}` }, initials(name));
}

/** A conversation's row: its own numbers, or (`group`) the sums over its topics, whose rows follow indented. */
function row(c: ConversationView, ctx: ListContext, group?: ConversationGroup): HTMLElement {
  const child = c.parent !== undefined;
  const name = child ? `# ${childLabel(c)}` : displayName(c.conv, ctx.uid);
  const shown: Shown = group ?? c;
  // Redpoint's last activity (issue 43), else what a device of this demo saw.
  const at = group ? ctx.entryAt(group) : (c.at ?? ctx.at(c.conv));
  const active = ctx.open === c.conv;
  const classes = [
    'conv',
    child ? 'is-topic' : '',
    c.muted ? 'is-muted' : '',
    c.pending ? 'is-pending' : '',
    shown.unread > 0 || shown.markedUnread ? 'is-unread' : '',
    active ? 'is-active' : '',
  ];
  const [trigger, menu] = ctx.menus.render(`row:${c.conv}`, c.conv, name, actions(c, group));
  return h(
    'li',
    {
      class: classes.filter(Boolean).join(' '),
      'data-conv': c.conv,
      'data-parent': c.parent,
      // What the pill shows: a conversation with topics, the sum over them (its own row's number beside it).
      'data-unread': String(shown.unread),
      'data-own-unread': group ? String(c.unread) : undefined,
      'aria-current': active ? 'true' : undefined,
    },
    h(
      'button',
      { class: 'conv-open', type: 'button', 'data-action': 'open', 'data-conv': c.conv, 'data-focus': `open:${c.conv}` },
      avatar(name),
      h(
        'span',
        { class: 'conv-top' },
        h('span', { class: 'conv-name', 'data-role': 'name', title: c.conv }, name),
        levelMark(c),
        at === undefined
          ? null
          : h(
              'time',
              { class: 'conv-time', 'data-role': 'time', datetime: new Date(at).toISOString(), title: new Date(at).toLocaleString() },
              timeAgo(at, ctx.now),
            ),
      ),
      h(
        'span',
        { class: 'conv-bottom' },
        h('span', { class: 'conv-sub', 'data-role': 'sub' }, subtitle(c, shown, ctx)),
        marks(shown, group ? group.inBadge > 0 || group.unread === 0 : countsInBadge(c)),
      ),
    ),
    trigger,
    menu,
    group ? topics(group, ctx) : null,
  );
}

/** The topic rows under their conversation, each opened and read alone. */
function topics(group: ConversationGroup, ctx: ListContext): HTMLElement {
  return h(
    'ul',
    { class: 'topics', 'data-role': 'topics', 'aria-label': `Topics of ${displayName(group.conv, ctx.uid)}` },
    ...group.children.map((t) => row(t, ctx)),
  );
}

/** A conversation whose own row is hidden (deleted) while topics of it have news: its name and sums, then the topics. */
function header(group: ConversationGroup, ctx: ListContext): HTMLElement {
  const name = displayName(group.conv, ctx.uid);
  return h(
    'li',
    { class: `conv is-header${group.unread > 0 || group.markedUnread ? ' is-unread' : ''}`, 'data-conv': group.conv, 'data-unread': String(group.unread) },
    h(
      'span',
      { class: 'conv-open' },
      avatar(name),
      h('span', { class: 'conv-top' }, h('span', { class: 'conv-name', 'data-role': 'name', title: group.conv }, name)),
      h('span', { class: 'conv-bottom' }, h('span', { class: 'conv-sub', 'data-role': 'sub' }, childCounts(group)), marks(group, group.inBadge > 0)),
    ),
    topics(group, ctx),
  );
}

/** "2 topics", "1 thread", "2 topics, 1 thread": what a header's child rows are. */
function childCounts(group: ConversationGroup): string {
  const threads = group.children.filter((c) => c.thread !== undefined).length;
  const topics = group.children.length - threads;
  const parts = [topics > 0 ? `${topics} topic${topics === 1 ? '' : 's'}` : '', threads > 0 ? `${threads} thread${threads === 1 ? '' : 's'}` : ''];
  return parts.filter(Boolean).join(', ');
}

/** One entry of the list: a conversation's row, with its topics under it when it has any. */
function entry(group: ConversationGroup, ctx: ListContext): HTMLElement {
  if (!group.view) return header(group, ctx);
  return group.children.length > 0 ? row(group.view, ctx, group) : row(group.view, ctx);
}

function skeleton(): HTMLElement {
  return h(
    'li',
    { class: 'conv skeleton' },
    h(
      'span',
      { class: 'conv-open' },
      h('span', { class: 'avatar' }),
      h('span', { class: 'conv-top' }, h('span', { class: 'bar' })),
      h('span', { class: 'conv-bottom' }, h('span', { class: 'bar short' })),
    ),
  );
}

/** The list's entries (skeletons while nothing is known: never a fake empty list). */
export function listRows(groups: readonly ConversationGroup[] | null, ctx: ListContext): HTMLElement[] {
  if (!groups) return [skeleton(), skeleton(), skeleton()];
  return groups.map((g) => entry(g, ctx));
}
