import type { RedpointClient } from '@redpoint/client';
import { createConversation, membersOf, sendMessages, setServerSettings } from './api.js';
import type { StatusLine } from './status-line.js';
import { displayName } from './view.js';

/** The right-hand panel: make conversations and send test messages through the HTTP API. */

function form(id: string): HTMLFormElement {
  const el = document.getElementById(id);
  if (!(el instanceof HTMLFormElement)) throw new Error(`#${id} is not a form`);
  return el;
}

export function setupDevPanel(client: RedpointClient, uid: string, log: StatusLine): () => void {
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

  /** Next seq per conversation: the client's newest known, or what this page sent last. */
  const sent = new Map<string, number>();
  const nextSeq = (conv: string): number => {
    const seq = Math.max(client.lastSeq(conv), sent.get(conv) ?? 0) + 1;
    sent.set(conv, seq);
    return seq;
  };

  const send = async (conv: string, sender: string, count: number, mention: boolean): Promise<void> => {
    const messages = Array.from({ length: count }, () => ({ conv, seq: nextSeq(conv), sender, ...(mention ? { mentions: [uid] } : {}) }));
    await sendMessages(messages);
  };

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

  form('send-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    const conv = String(data.get('conv'));
    const count = Math.min(50, Math.max(1, Number(data.get('count')) || 1));
    run(`Sent ${count} message(s) to ${conv}`, () => send(conv, String(data.get('sender')).trim() || someoneElse([]), count, data.get('mention') === 'on'));
  });

  document.getElementById('seed')?.addEventListener('click', () => {
    run('Seeded demo conversations', async () => {
      // The cast never includes this user: on bob's page, "bob" is alice.
      const cast = (name: string): string => (name === uid ? 'alice' : name);
      const friend = cast('bob');
      // A private chat is named by both members (sorted), and each side shows the other's name.
      const dm = `dm:${[uid, friend].sort().join(':')}`;
      await createConversation(dm, [uid, friend], 'private');
      await createConversation('design-team', [uid, friend, cast('carol'), cast('dave')], 'group');
      await createConversation('release-train', [uid, cast('carol'), cast('erin')], 'group');
      await createConversation('announcements', [uid, 'redpoint-bot'], 'system');
      await createConversation('random', [uid, cast('dave'), cast('erin')], 'group');
      await send(dm, friend, 2, false);
      await send('design-team', cast('carol'), 5, false);
      await send('design-team', cast('dave'), 1, true);
      await send('release-train', cast('erin'), 3, false);
      await send('announcements', 'redpoint-bot', 1, false);
      await send('random', cast('dave'), 12, false);
      await setServerSettings(uid, 'random', { muted: true });
      for (const conv of [dm, 'design-team', 'release-train', 'announcements', 'random']) known.add(conv);
      refreshOptions();
    });
  });

  return refreshOptions;
}
