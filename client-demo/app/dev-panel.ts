import type { RedpointClient } from '@redpoint/client';
import { createConversation, membersOf, setServerSettings } from './api.js';
import { displayName } from './names.js';
import type { Outbox, Outgoing } from './outbox.js';
import { SAMPLE_TEXTS, seedChats } from './seed-script.js';
import type { StatusLine } from './status-line.js';

/** The test tools: make conversations and send test messages through the HTTP API. */

function form(id: string): HTMLFormElement {
  const el = document.getElementById(id);
  if (!(el instanceof HTMLFormElement)) throw new Error(`#${id} is not a form`);
  return el;
}

/** The Send form's kinds: a plain message (absent), a reaction (does not count), an @all. */
const KINDS: Record<string, 'reaction' | 'all' | undefined> = { message: undefined, reaction: 'reaction', all: 'all' };

export function setupDevPanel(client: RedpointClient, uid: string, log: StatusLine, outbox: Outbox): () => void {
  const known = new Set<string>();
  const select = document.getElementById('send-conv') as HTMLSelectElement;
  const sender = document.querySelector<HTMLInputElement>('#send-form input[name="sender"]');
  /** Someone other than this user: a message from yourself is never unread, so Send would show nothing. */
  const someoneElse = (candidates: readonly string[]): string => candidates.find((m) => m !== uid) ?? (uid === 'bob' ? 'alice' : 'bob');
  /** "From" follows the chosen conversation: its first member who is not this user. */
  const pickSender = (): void => {
    const conv = select.value;
    if (!sender || !conv) return;
    sender.value = someoneElse([]);
    membersOf(conv).then(
      (members) => {
        if (select.value === conv) sender.value = someoneElse(members);
      },
      (err: unknown) => log.error(`Failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  };
  select.addEventListener('change', pickSender);

  const refreshOptions = (): void => {
    for (const c of client.state.conversations) known.add(c.conv);
    const current = select.value;
    const names = [...known].sort();
    if (names.join('\n') === [...select.options].map((o) => o.value).join('\n')) return;
    select.replaceChildren(...names.map((name) => new Option(displayName(name, uid), name)));
    if (names.includes(current)) select.value = current;
    if (select.value !== current) pickSender();
  };

  const run = (what: string, job: () => Promise<void>): void => {
    job().then(
      () => log.info(what),
      (err: unknown) => log.error(`Failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  };

  form('create-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    const conv = String(data.get('conv')).trim();
    const members = String(data.get('members'))
      .split(/[\s,]+/)
      .filter(Boolean);
    if (!members.includes(uid)) members.push(uid);
    run(`Created ${conv}`, async () => {
      await createConversation(conv, members, String(data.get('category')));
      known.add(conv);
      refreshOptions();
      select.value = conv;
      pickSender();
    });
  });

  let samples = 0;
  form('send-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    const conv = String(data.get('conv'));
    const count = Math.min(50, Math.max(1, Number(data.get('count')) || 1));
    const from = String(data.get('sender')).trim() || someoneElse([]);
    const typed = String(data.get('text') ?? '').trim();
    const kind = KINDS[String(data.get('kind'))];
    const outgoing = Array.from(
      { length: count },
      (): Outgoing => ({
        sender: from,
        text: typed || (kind === 'reaction' ? '👍' : (SAMPLE_TEXTS[samples++ % SAMPLE_TEXTS.length] ?? '')),
        mention: kind === undefined && data.get('mention') === 'on',
        agoMs: 0,
        ...(kind ? { kind } : {}),
      }),
    );
    const what = kind === 'reaction' ? 'reaction(s)' : kind === 'all' ? '@all message(s)' : 'message(s)';
    run(`Sent ${count} ${what} to ${displayName(conv, uid)}`, () => outbox.send(conv, outgoing));
  });

  document.getElementById('seed')?.addEventListener('click', () => {
    run('Seeded demo conversations', async () => {
      // The cast never includes this user: on bob's page, "bob" is alice.
      const chats = seedChats(uid, (name) => (name === uid ? 'alice' : name));
      for (const chat of chats) await createConversation(chat.conv, chat.members, chat.category);
      for (const chat of chats) {
        const last = chat.lines.length - 1;
        await outbox.send(
          chat.conv,
          chat.lines.map((line, i) => ({
            sender: line.from,
            text: line.text,
            mention: line.mention ?? false,
            agoMs: (chat.lastAgoMin + 3 * (last - i)) * 60_000,
          })),
        );
        if (chat.muted) await setServerSettings(uid, chat.conv, { muted: true });
        known.add(chat.conv);
      }
      refreshOptions();
    });
  });

  return refreshOptions;
}
