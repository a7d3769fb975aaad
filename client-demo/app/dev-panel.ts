import type { RedpointClient } from '@redpoint/client';
import { createConversation, sendMessages, setServerSettings } from './api.js';
import type { StatusLine } from './status-line.js';

/** The right-hand panel: make conversations and send test messages through the HTTP API. */

function form(id: string): HTMLFormElement {
  const el = document.getElementById(id);
  if (!(el instanceof HTMLFormElement)) throw new Error(`#${id} is not a form`);
  return el;
}

export function setupDevPanel(client: RedpointClient, uid: string, log: StatusLine): () => void {
  const known = new Set<string>();
  const select = document.getElementById('send-conv') as HTMLSelectElement;

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
    select.replaceChildren(...names.map((name) => new Option(name, name)));
    if (names.includes(current)) select.value = current;
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
    });
  });

  form('send-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    const conv = String(data.get('conv'));
    const count = Math.min(50, Math.max(1, Number(data.get('count')) || 1));
    run(`Sent ${count} message(s) to ${conv}`, () => send(conv, String(data.get('sender')).trim() || 'bob', count, data.get('mention') === 'on'));
  });

  document.getElementById('seed')?.addEventListener('click', () => {
    run('Seeded demo conversations', async () => {
      await createConversation('bob', [uid, 'bob'], 'private');
      await createConversation('design-team', [uid, 'bob', 'carol', 'dave'], 'group');
      await createConversation('release-train', [uid, 'carol', 'erin'], 'group');
      await createConversation('announcements', [uid, 'redpoint-bot'], 'system');
      await createConversation('random', [uid, 'dave', 'erin'], 'group');
      await send('bob', 'bob', 2, false);
      await send('design-team', 'carol', 5, false);
      await send('design-team', 'dave', 1, true);
      await send('release-train', 'erin', 3, false);
      await send('announcements', 'redpoint-bot', 1, false);
      await send('random', 'dave', 12, false);
      await setServerSettings(uid, 'random', { muted: true });
      for (const conv of ['bob', 'design-team', 'release-train', 'announcements', 'random']) known.add(conv);
      refreshOptions();
    });
  });

  return refreshOptions;
}
