import type { RedpointClient } from '@redpoint/client';
import { createConversation, membersOf, rowHeads, setServerSettings } from './api.js';
import { displayName, rowName } from './names.js';
import { type Outbox, type Outgoing, type Target, targetOf } from './outbox.js';
import { SAMPLE_TEXTS, type SeedChat, seedChats } from './seed-script.js';
import type { StatusLine } from './status-line.js';

/** The test tools: make conversations and send test messages through the HTTP API. */

function form(id: string): HTMLFormElement {
  const el = document.getElementById(id);
  if (!(el instanceof HTMLFormElement)) throw new Error(`#${id} is not a form`);
  return el;
}

/** The Send form's kinds: a plain message (absent), a reaction (does not count), an @all. */
const KINDS: Record<string, 'reaction' | 'all' | undefined> = { message: undefined, reaction: 'reaction', all: 'all' };

/** A seeded chat's (or topic's) lines, 3 minutes apart, the last `lastAgoMin` minutes ago. */
function spaced(chat: Pick<SeedChat, 'lines' | 'lastAgoMin'>): Outgoing[] {
  const last = chat.lines.length - 1;
  return chat.lines.map((line, i) => ({
    sender: line.from,
    text: line.text,
    mention: line.mention ?? false,
    agoMs: (chat.lastAgoMin + 3 * (last - i)) * 60_000,
  }));
}

export function setupDevPanel(client: RedpointClient, uid: string, log: StatusLine, outbox: Outbox): () => void {
  /** Every row seen, by id: a conversation, or a topic of one (sent to with `topic`). */
  const known = new Map<string, { name: string; target: Target }>();
  const remember = (c: { conv: string; parent?: string; topic?: string }): void => {
    known.set(c.conv, { name: rowName(c, uid), target: targetOf(c) });
  };
  /** The conversation the chosen row belongs to (a topic's members are its conversation's). */
  const chosen = (): Target => known.get(select.value)?.target ?? { conv: select.value };
  const select = document.getElementById('send-conv') as HTMLSelectElement;
  const sender = document.querySelector<HTMLInputElement>('#send-form input[name="sender"]');
  /** Someone other than this user: a message from yourself is never unread, so Send would show nothing. */
  const someoneElse = (candidates: readonly string[]): string => candidates.find((m) => m !== uid) ?? (uid === 'bob' ? 'alice' : 'bob');
  /** "From" follows the chosen conversation: its first member who is not this user. */
  const pickSender = (): void => {
    const conv = select.value;
    if (!sender || !conv) return;
    const placeholder = someoneElse([]);
    sender.value = placeholder;
    membersOf(chosen().conv).then(
      (members) => {
        // Not over what the user typed meanwhile (the tests type "From" at once: their message
        // went out from another member, and its unread or mention never showed).
        if (select.value === conv && sender.value === placeholder) sender.value = someoneElse(members);
      },
      (err: unknown) => log.error(`Failed: ${err instanceof Error ? err.message : String(err)}`),
    );
  };
  select.addEventListener('change', pickSender);

  const refreshOptions = (): void => {
    for (const c of client.state.conversations) remember(c);
    const current = select.value;
    const names = [...known.keys()].sort();
    if (names.join('\n') === [...select.options].map((o) => o.value).join('\n')) return;
    select.replaceChildren(...names.map((name) => new Option(known.get(name)?.name ?? name, name)));
    if (names.includes(current)) select.value = current;
    if (select.value !== current) pickSender();
  };

  const run = (what: string, job: () => Promise<unknown>): void => {
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
      remember({ conv });
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
    const to = known.get(conv)?.target ?? { conv };
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
    run(`Sent ${count} ${what} to ${known.get(conv)?.name ?? displayName(conv, uid)}`, () => outbox.send(to, outgoing));
  });

  document.getElementById('seed')?.addEventListener('click', () => {
    run('Seeded demo conversations', async () => {
      // The cast never includes this user: on bob's page, "bob" is alice.
      const chats = seedChats(uid, (name) => (name === uid ? 'alice' : name));
      for (const chat of chats) await createConversation(chat.conv, chat.members, chat.category);
      // The conversations' ids are fixed: another page's seed on this server may have sent to them
      // already, and this page's client may not have heard of them yet. A member now of every one
      // (and of its topics), this user's rows say where each is.
      outbox.continueFrom(await rowHeads(uid));
      for (const chat of chats) {
        const seqs = await outbox.send({ conv: chat.conv }, spaced(chat));
        // A topic's first message creates it, with the conversation's members (PROTOCOL.md "Topics").
        for (const topic of chat.topics ?? []) await outbox.send({ conv: chat.conv, topic: topic.topic }, spaced(topic));
        // A thread's replies, off the root this seed just sent: whoever they mention follows it from that reply on (PROTOCOL.md "Threads").
        const thread = chat.thread;
        const root = thread && chat.lines[thread.root - 1];
        const rootSeq = thread && seqs[thread.root - 1];
        if (thread && root && rootSeq !== undefined) await outbox.send({ conv: chat.conv, thread: rootSeq, rootSender: root.from }, spaced(thread));
        if (chat.muted) await setServerSettings(uid, chat.conv, { muted: true });
        remember({ conv: chat.conv });
      }
      refreshOptions();
    });
  });

  return refreshOptions;
}
