import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler, type ValueError, ValueErrorType } from '@sinclair/typebox/compiler';
import { RedpointError } from './errors.js';
import { CONV_REF_PATTERN, ID_PATTERN, LIMITS } from './limits.js';

/**
 * Schemas of every untrusted input. They double as JSON Schema for the docs; `decode` checks a
 * parsed value against one and throws `invalid_request` naming the first offending field.
 */
export const Id = Type.String({ minLength: 1, maxLength: LIMITS.idMaxLength, pattern: ID_PATTERN });
/**
 * A conversation named by a user operation or a row: a conversation id, or a topic's
 * `<conv>#t:<topic>` (PROTOCOL.md "Topics"). Never where the message service names a
 * conversation (members, a message's `conv`).
 */
export const ConvRef = Type.String({ minLength: 1, maxLength: LIMITS.convRefMaxLength, pattern: CONV_REF_PATTERN });
export const Seq = Type.Integer({ minimum: 1, maximum: LIMITS.maxSeq });
/** A read may name seq 0 (nothing read) without being an error. */
export const ReadSeq = Type.Integer({ minimum: 0, maximum: LIMITS.maxSeq });
export const Category = Type.String({ minLength: 1, maxLength: LIMITS.categoryMaxLength, pattern: ID_PATTERN });

export const Message = Type.Object(
  {
    conv: Id,
    // Topics.
    topic: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: LIMITS.topicIdMaxLength,
        pattern: ID_PATTERN,
        description:
          "The conversation's topic this message belongs to (absent: the conversation itself, its general topic). Its seq is in the topic's own seq space; the first message of a topic creates it, with the conversation's members (PROTOCOL.md \"Topics\").",
      }),
    ),
    // Threads.
    thread: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: LIMITS.maxSeq,
        description:
          "A thread reply: the seq of the thread's root message in `conv` (its general topic). The reply's own seq is in the thread's seq space (1, 2, 3, ... per thread); it never counts in the conversation, only for the thread's followers (PROTOCOL.md \"Threads\"). Not with `topic`.",
      }),
    ),
    rootSender: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: LIMITS.idMaxLength,
        pattern: ID_PATTERN,
        description:
          "A thread reply's root message's sender: made a follower of the thread (when a member of the conversation), as the replier and the reply's mentions are.",
      }),
    ),
    seq: Seq,
    sender: Id,
    mentions: Type.Optional(Type.Array(Id, { maxItems: LIMITS.mentionsPerMessage })),
    // Issue 43.
    mentionAll: Type.Optional(Type.Boolean({ description: '@all / @here: a mention of every member of the conversation but the sender.' })),
    // Issue 43, "What counts".
    counts: Type.Optional(
      Type.Boolean({
        description:
          'false: an edit, reaction or notice. It raises lastSeq and the last activity (pushes go out) but adds no unread; its mentions and @all are ignored.',
      }),
    ),
    recalls: Type.Optional(
      Type.Array(Seq, {
        maxItems: LIMITS.recallsPerMessage,
        description:
          "Seqs of this conversation this message recalls: from now on they do not count, nor their mentions, for every member who has not read them. Idempotent; may arrive before the recalled message. Send the recall's own notice with counts: false.",
      }),
    ),
    at: Type.Optional(
      Type.Integer({
        minimum: LIMITS.atMin,
        maximum: Number.MAX_SAFE_INTEGER,
        description:
          "The message service's timestamp of the message (ms since the Unix epoch): the conversation's last activity. At most 24 h ahead of the server's clock.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type MessageInput = Static<typeof Message>;

/**
 * The rule the schema cannot state: a message's `at` at most `LIMITS.atMaxAheadMs` ahead of
 * `now` (the server's clock); otherwise `invalid_request` naming it. Returns the messages.
 */
export function checkMessageTimes<T extends { at?: number }>(messages: T[], now: number): T[] {
  const limit = now + LIMITS.atMaxAheadMs;
  messages.forEach((m, i) => {
    if (m.at !== undefined && m.at > limit) {
      const where = messages.length > 1 ? `/messages/${i}/at` : '/at';
      throw new RedpointError('invalid_request', `${where}: more than ${LIMITS.atMaxAheadMs / 3_600_000} h ahead of the server's clock`);
    }
  });
  return messages;
}

export const MessageBatch = Type.Object({ messages: Type.Array(Message, { minItems: 1, maxItems: LIMITS.messagesPerBatch }) }, { additionalProperties: false });

/** The body of `POST /v1/messages`, as documented; `decodeMessages` picks the branch so errors name its field. */
export const MessagesBody = Type.Union([Message, MessageBatch]);

/** `POST /v1/messages` takes one message or `{messages: [...]}`; errors name the field either way. */
export function decodeMessages(body: unknown): MessageInput[] {
  if (typeof body === 'object' && body !== null && 'messages' in body) return checkMessageTimes(decode(MessageBatch, body).messages, Date.now());
  return checkMessageTimes([decode(Message, body)], Date.now());
}

export const MembersBody = Type.Object(
  {
    add: Type.Optional(Type.Array(Id, { maxItems: LIMITS.membersPerChange })),
    remove: Type.Optional(Type.Array(Id, { maxItems: LIMITS.membersPerChange })),
    category: Type.Optional(Category),
  },
  { additionalProperties: false },
);

/**
 * A read generation (ConvState.readGen; 0 before any "unread from here"): a read sent with the
 * one it was made in is ignored once a newer one is in.
 */
export const ReadGen = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });

export const ReadBody = Type.Object({ conv: ConvRef, seq: ReadSeq, gen: Type.Optional(ReadGen) }, { additionalProperties: false });

/**
 * POST /v1/users/:uid/conversations/:conv/unread-from: `seq` and every message after it become
 * unread. `gen`: the read generation it is based on plus one (absent: the server's current one
 * plus one, taken in the same step); a retry with the same `gen` changes nothing.
 */
export const UnreadFromBody = Type.Object(
  { seq: Type.Integer({ minimum: 1, maximum: LIMITS.maxSeq }), gen: Type.Optional(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER })) },
  { additionalProperties: false },
);

/** Issue 43: a conversation's notification level (PROTOCOL.md "Notification levels"). */
export const Level = Type.Union([Type.Literal('all'), Type.Literal('mentions'), Type.Literal('none')], {
  description: "'all' counts the unread in the totals, 'mentions' only the @-mentions, 'none' nothing (the same as muted).",
});

export const SettingsBody = Type.Object(
  { muted: Type.Optional(Type.Boolean()), markedUnread: Type.Optional(Type.Boolean()), level: Type.Optional(Level) },
  { additionalProperties: false, minProperties: 1 },
);

// --- Read receipts (issue 44) ---

/** `PUT /v1/users/:uid/settings`: the user's own settings, either or both. */
export const UserSettingsBody = Type.Object(
  {
    shareReads: Type.Optional(
      Type.Boolean({ description: "false: the user's read positions are not recorded or shown to others, and they see no one else's." }),
    ),
    mutedMentions: Type.Optional(
      Type.Boolean({
        description:
          'true: a muted conversation (level `none`) adds its unread mentions to the badge as a level-`mentions` one does (PROTOCOL.md "Notification levels"). Default false.',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** `GET /v1/users/:uid/conversations/:conv/reads`: either `seqs` or `latest`. */
export const ReadsQuery = Type.Object({
  seqs: Type.Optional(
    Type.String({ maxLength: 50 * 17, pattern: '^[0-9]{1,15}(,[0-9]{1,15}){0,49}$', description: 'The seqs to count, comma-separated (at most 50).' }),
  ),
  latest: Type.Optional(Type.String({ pattern: '^([1-9]|[1-4][0-9]|50)$', description: 'The latest N messages (1..50), up to the head.' })),
});

// --- end read receipts ---

/** `since` is `<version>` or `<epoch>:<version>`; omitted → from scratch. */
export const SyncQuery = Type.Object({
  since: Type.Optional(
    Type.String({ maxLength: 64, pattern: '^([A-Za-z0-9_-]{1,32}:)?[0-9]{1,15}$', description: 'The cursor, `<epoch>:<version>`; omit it for a first sync.' }),
  ),
  /** Only for a bare `since=<version>`; empty means whatever the current epoch is. */
  epoch: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_-]{0,32}$', description: 'The epoch of a bare `since=<version>` (ignored when `since` has one).' })),
  limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,5}$', description: 'Maximum entries in the reply (default 500, clamped to 1..1000).' })),
});

/** `POST /dev/token` (dev mode only). */
export const DevTokenBody = Type.Object({ uid: Id }, { additionalProperties: false });

/**
 * What a demo message was sent as (issue 43; absent: a plain message): `reaction` with `counts: false`,
 * `all` with `mentionAll: true`, `recall` with `counts: false` and `recalls: [recalls]`.
 */
export const DemoMessageKind = Type.Union([Type.Literal('reaction'), Type.Literal('all'), Type.Literal('recall')], {
  description: "How it was sent (absent: a plain message): 'reaction' and 'recall' with counts: false, 'all' with mentionAll: true.",
});

/** A message the demo's test tools sent: Redpoint keeps no text, so the dev entry keeps these for the page. */
const DemoSentMessage = Type.Object(
  {
    seq: Seq,
    sender: Id,
    text: Type.String({ maxLength: 500 }),
    mention: Type.Boolean({ description: 'It @-mentioned the user whose page sent it.' }),
    agoMs: Type.Integer({ minimum: 0, maximum: 30 * 86_400_000, description: 'How long ago it was sent (the seed spaces its messages out).' }),
    kind: Type.Optional(DemoMessageKind),
    recalls: Type.Optional(Seq),
  },
  { additionalProperties: false },
);

/**
 * The demo page (dev entry only): a device saw `conv`'s newest message become `seq`; with
 * `messages`, the test tools sent those (each seq at most `seq`).
 */
export const DemoActivityBody = Type.Object(
  { conv: Id, seq: Seq, messages: Type.Optional(Type.Array(DemoSentMessage, { maxItems: 50 })) },
  { additionalProperties: false },
);

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>();

function checker<T extends TSchema>(schema: T): TypeCheck<T> {
  let check = compiled.get(schema);
  if (!check) {
    check = TypeCompiler.Compile(schema);
    compiled.set(schema, check);
  }
  return check as TypeCheck<T>;
}

export function decode<T extends TSchema>(schema: T, value: unknown): Static<T> {
  const check = checker(schema);
  if (check.Check(value)) return value;
  const first = deepest(check.Errors(value).First());
  const where = first?.path ? first.path : '(body)';
  throw new RedpointError('invalid_request', `${where}: ${first ? messageOf(first) : 'invalid value'}`);
}

/**
 * TypeBox's own message, but for a change with no field (`minProperties`): "at least 3 properties"
 * counts a frame's `t` and `id` too, so it names the fields to send instead.
 */
function messageOf(error: ValueError): string {
  if (error.type !== ValueErrorType.ObjectMinProperties) return error.message;
  const { properties, required } = error.schema as { properties?: Record<string, unknown>; required?: string[] };
  const optional = Object.keys(properties ?? {}).filter((key) => !required?.includes(key));
  return optional.length > 0 ? `nothing to change: send at least one of ${optional.join(', ')}` : error.message;
}

/**
 * A union's error says only "Expected union value" at the union: the error of the alternative
 * that got furthest names the offending field (a read `[conv, seq]` or `[conv, seq, gen]` with a
 * bad seq: `/reads/0/1`).
 */
function deepest(error: ValueError | undefined): ValueError | undefined {
  if (!error || error.errors.length === 0) return error;
  let best = error;
  for (const alternative of error.errors) {
    const found = deepest(alternative.First());
    if (found && found.path.length > best.path.length) best = found;
  }
  return best;
}
