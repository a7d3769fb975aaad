import type { ReconcileRequest } from '../../protocol/admin-schemas.js';
import { threadPrefix, topicConv } from '../../protocol/child-id.js';
import { RedpointError } from '../../protocol/errors.js';
import type { EngineAdmin } from '../engine/admin.js';
import type { Engine, EngineOptions, UserOpResult } from '../engine/engine.js';
import { threadsOf } from '../sync/threads.js';
import { type DeleteResult, deleteConversation } from './delete-conversation.js';
import { type EraseResult, eraseUser, type UserTraces, userTraces } from './erase.js';
import { type HeadAssertion, type HeadsResult, reassertHeads } from './heads.js';
import { type ImportBatch, type ImportBatchResult, importBatch } from './import.js';
import { type ConversationInspection, inspectConversation, inspectUser, type UserInspection } from './inspect.js';
import { type RebaseResult, rebaseConversation } from './rebase.js';
import { type ReconcilePage, Reconciler } from './reconcile.js';
import { resetRead } from './reset-read.js';

/** Walk from `cursor` ('' starts; ignored when `users` or `conversations` is given), `count` ids per page. */
export type { ReconcileRequest };

/**
 * Everything the `redpoint` CLI does to a store, as one interface with two implementations: this
 * one over an engine in the same process (a Redis store the CLI reaches directly, and the server's
 * admin endpoints), and the CLI's HTTP client of those endpoints (a memory engine lives only in
 * its server's process). Replies are plain JSON-able objects, the same either way.
 */
/** The durable tier's part of an erase or a conversation delete (server/durable/): the rows go too. */
export interface DurableErase {
  eraseUser(uid: string): Promise<void>;
  deleteConversation(conv: string, gen: number): Promise<void>;
  /** The conversations PostgreSQL holds whose id starts with `prefix` (a conversation's thread children, beyond the registry Redis may have lost). */
  conversationsUnder(prefix: string): Promise<string[]>;
}

export interface Toolbox {
  reconcile(request: ReconcileRequest): Promise<ReconcilePage>;
  /** How many users or conversations a walk will meet (for progress bars; a walk of its own). */
  count(kind: 'users' | 'conversations'): Promise<number>;
  inspectUser(uid: string): Promise<UserInspection>;
  inspectConversation(conv: string): Promise<ConversationInspection | null>;
  eraseUser(uid: string, options: { scan: boolean }): Promise<EraseResult>;
  /** What is left of a user (its own state, conversations listing it): empty after an erase. */
  traces(uid: string): Promise<UserTraces>;
  deleteConversation(conv: string): Promise<DeleteResult | null>;
  reassertHeads(heads: readonly HeadAssertion[]): Promise<HeadsResult>;
  importBatch(batch: ImportBatch, dryRun: boolean): Promise<ImportBatchResult>;
  /** Current heads (missing conversations left out). */
  heads(convs: readonly string[]): Promise<Record<string, number>>;
  /** Lowers the user's read position in `conv` to `seq` (absent: the head now); reset-read.ts. */
  resetRead(uid: string, conv: string, seq?: number): Promise<ResetReadResult>;
  /** Lowers `conv`'s head to `seq` and rebases every member to it (rebase.ts); null: no such conversation. */
  rebase(conv: string, seq: number): Promise<RebaseResult | null>;
  close(): Promise<void>;
}

/** The change reply (PROTOCOL.md), as `POST /v1/users/:uid/read` answers. */
export type ResetReadResult = Pick<UserOpResult, 'changed' | 'epoch' | 'version' | 'state'>;

const DEFAULT_WALK_PAGE = 200;
const COUNT_PAGE = 1_000;

export class LocalToolbox implements Toolbox {
  constructor(
    private readonly engine: Engine,
    private readonly admin: EngineAdmin,
    private readonly settings: EngineOptions & {
      largeGroupThreshold: number;
      durableErase?: DurableErase | undefined;
      /** How reconcile waits out its grace period (ReconcileOptions.graceWait; default a timer). */
      graceWait?: (ms: number) => Promise<unknown>;
    },
    /** Closes the engine when the toolbox closes (the CLI's own engine; not a server's). */
    private readonly owned = false,
  ) {}

  reconcile(request: ReconcileRequest): Promise<ReconcilePage> {
    // One target per request: ids of users, ids of conversations, or a page of the walk.
    const targets = [request.users, request.conversations, request.cursor ?? request.count].filter((t) => t !== undefined).length;
    if (targets > 1) return Promise.reject(new RedpointError('invalid_request', 'name one of users, conversations or cursor/count'));
    const reconciler = new Reconciler(this.engine, this.admin, this.settings.largeGroupThreshold, {
      repair: request.repair,
      graceMs: request.graceMs,
      ...(this.settings.graceWait ? { graceWait: this.settings.graceWait } : {}),
    });
    if (request.users) return reconciler.users(request.users);
    if (request.conversations) return reconciler.conversations(request.conversations);
    return reconciler.page(request.cursor ?? '', request.count ?? DEFAULT_WALK_PAGE);
  }

  async count(kind: 'users' | 'conversations'): Promise<number> {
    const seen = new Set<string>();
    let cursor = '';
    do {
      const page = kind === 'users' ? await this.admin.scanUsers(cursor, COUNT_PAGE) : await this.admin.scanConversations(cursor, COUNT_PAGE);
      for (const id of page.ids) seen.add(id);
      cursor = page.cursor;
    } while (cursor !== '');
    return seen.size;
  }

  inspectUser(uid: string): Promise<UserInspection> {
    return inspectUser(this.engine, this.admin, this.settings, uid);
  }

  inspectConversation(conv: string): Promise<ConversationInspection | null> {
    return inspectConversation(this.admin, conv);
  }

  async eraseUser(uid: string, options: { scan: boolean }): Promise<EraseResult> {
    // A user that left Redis (cold, or Redis lost) is put back first, so its conversations are
    // left as for any other; then its rows go from the durable tier too.
    if (this.settings.durableErase) await this.engine.position(uid);
    const result = await eraseUser(this.engine, this.admin, this.settings.largeGroupThreshold, uid, options);
    await this.settings.durableErase?.eraseUser(uid);
    return result;
  }

  traces(uid: string): Promise<UserTraces> {
    return userTraces(this.admin, uid);
  }

  async deleteConversation(conv: string): Promise<DeleteResult | null> {
    // Topics first (PROTOCOL.md "Topics"), then the registry, then the conversation: a retry after
    // a failure anywhere still finds what is left (the registry goes only once each topic is gone).
    const topics = await this.engine.topics(conv);
    for (const topic of topics) await this.deleteConversation(topicConv(conv, topic));
    // Threads (PROTOCOL.md "Threads"): every one, followed or not, from the registry (and, with the
    // durable tier, those PostgreSQL holds: a registry Redis lost), then the registry.
    const threads = new Set(await threadsOf(this.engine, conv));
    for (const child of (await this.settings.durableErase?.conversationsUnder(threadPrefix(conv))) ?? []) threads.add(child);
    for (const child of threads) await this.deleteConversation(child);
    if (topics.length > 0) await this.engine.dropTopics(conv);
    const result = await deleteConversation(this.engine, this.admin, conv);
    await this.engine.dropThreads(conv);
    if (result) await this.settings.durableErase?.deleteConversation(conv, result.gen);
    return result;
  }

  reassertHeads(heads: readonly HeadAssertion[]): Promise<HeadsResult> {
    return reassertHeads(this.engine, heads);
  }

  importBatch(batch: ImportBatch, dryRun: boolean): Promise<ImportBatchResult> {
    return importBatch(this.engine, this.settings.largeGroupThreshold, batch, dryRun);
  }

  async heads(convs: readonly string[]): Promise<Record<string, number>> {
    return Object.fromEntries(await this.engine.heads(convs));
  }

  async resetRead(uid: string, conv: string, seq?: number): Promise<ResetReadResult> {
    const { changed, epoch, version, state } = await resetRead(this.engine, uid, conv, seq);
    return { changed, epoch, version, state };
  }

  async rebase(conv: string, seq: number): Promise<RebaseResult | null> {
    // A conversation evicted to PostgreSQL is put back by the engine's own restore (RedisAdmin);
    // the rows the rebase changes go to PostgreSQL through the drain, by generation (pg-store.ts).
    return rebaseConversation(this.engine, this.admin, conv, seq);
  }

  async close(): Promise<void> {
    if (this.owned) await this.engine.close();
  }
}
