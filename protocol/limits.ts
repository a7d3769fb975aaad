/** Hard limits on untrusted input. Every schema and the gateway refer to these, never to literals. */
export const LIMITS = {
  /** Ids (users, conversations): short opaque strings, safe as Redis key parts. */
  idMaxLength: 128,
  categoryMaxLength: 32,
  /**
   * Seqs are kept below 2^48 so that they stay exact integers through every layer
   * (Lua numbers are doubles; MessagePack encodes them as int64).
   */
  maxSeq: 2 ** 48,
  messagesPerBatch: 1000,
  mentionsPerMessage: 1000,
  membersPerChange: 10_000,
  readsPerBatch: 500,
  /** WebSocket request ids (echoed in replies) are integers in [0, requestIdMax]. */
  requestIdMax: 2 ** 31,
  /** HTTP request bodies larger than this are refused with 413 before parsing. */
  maxBodyBytes: 1024 * 1024,
  /** Entries in one pull page; a client may ask for fewer. */
  pullPageMax: 1000,
  pullPageDefault: 500,
  /**
   * Conversation states per frame of a snapshot sent in parts (WebSocket `sync-part`), and per
   * chunk of an HTTP sync body: about 40 KB of JSON, so no frame is megabytes and the server
   * serves others between chunks.
   */
  snapshotPartConvs: 250,
  /** Pending @-mention seqs kept per conversation; beyond this the oldest are forgotten. */
  mentionSeqsPerConversation: 1000,
  /**
   * Non-counting seqs (`counts: false` messages, recalls; issue 43) kept per user and conversation,
   * the newest; beyond this the oldest are forgotten and count again (PROTOCOL.md "What counts").
   */
  nocountSeqsPerConversation: 1000,
  /** Seqs one message may recall (issue 43). */
  recallsPerMessage: 100,
  /**
   * A message's `at` (ms since the Unix epoch, issue 43) is refused when below this (2001-09-09:
   * a smaller value is most likely seconds, not ms) ...
   */
  atMin: 1_000_000_000_000,
  /** ... or more than this ahead of the server's clock: last activity is a max-register, and one absurd value would pin the conversation's order forever. */
  atMaxAheadMs: 24 * 60 * 60 * 1000,
  /** Topics one conversation may have (PROTOCOL.md "Topics"); a message that would make one more is refused with `limit_exceeded`. */
  topicsPerConversation: 100,
  /** A topic id's length: a topic's conversation id `<conv>#t:<topic>` then stays within `convRefMaxLength`. */
  topicIdMaxLength: 64,
  /**
   * Threads one user follows per conversation (PROTOCOL.md "Threads"): an explicit follow beyond
   * is refused with `limit_exceeded`, an implicit one (replying, being mentioned, the root's
   * sender) is dropped and counted (`redpoint_thread_follows_dropped_total`).
   */
  threadsFollowedPerConversation: 200,
  /** A conversation reference in a user operation: a conversation id, a topic's `<conv>#t:<topic>` (128 + 3 + 64), or a thread's `<conv>#r:<root>` (shorter). */
  convRefMaxLength: 128 + 3 + 64,
} as const;

/** Ids are restricted to a character set that needs no escaping in keys, URLs or logs. */
export const ID_PATTERN = '^[A-Za-z0-9_.:@-]+$';
/** A conversation reference (user operations, rows): an id, a topic's child id `<conv>#t:<topic>`, or a thread's `<conv>#r:<root>` (protocol/child-id.ts). */
export const CONV_REF_PATTERN = '^[A-Za-z0-9_.:@-]+(#t:[A-Za-z0-9_.:@-]+|#r:[1-9][0-9]{0,15})?$';
