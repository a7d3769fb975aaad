import type { DeleteResult } from '../admin/delete-conversation.js';
import type { EraseResult } from '../admin/erase.js';
import type { HeadAssertion, HeadsResult } from '../admin/heads.js';
import type { ImportBatch, ImportBatchResult } from '../admin/import.js';
import type { ConversationInspection, UserInspection } from '../admin/inspect.js';
import type { RebaseResult } from '../admin/rebase.js';
import type { ReconcilePage } from '../admin/reconcile.js';
import type { ReconcileRequest, ResetReadResult, Toolbox } from '../admin/toolbox.js';

/**
 * The Toolbox of a running server, through its operator endpoints (PROTOCOL.md "Operator
 * endpoints", API key): for a store the CLI cannot reach itself, the memory engine's.
 */
export class HttpToolbox implements Toolbox {
  private readonly base: string;

  constructor(
    url: string,
    private readonly apiKey: string,
  ) {
    this.base = url.replace(/\/+$/, '');
  }

  reconcile(request: ReconcileRequest): Promise<ReconcilePage> {
    return this.call('POST', '/v1/admin/reconcile', request);
  }

  async count(kind: 'users' | 'conversations'): Promise<number> {
    return (await this.call<{ count: number }>('GET', `/v1/admin/count?kind=${kind}`)).count;
  }

  inspectUser(uid: string): Promise<UserInspection> {
    return this.call('GET', `/v1/admin/users/${encodeURIComponent(uid)}`);
  }

  inspectConversation(conv: string): Promise<ConversationInspection | null> {
    return this.call<ConversationInspection>('GET', `/v1/admin/conversations/${encodeURIComponent(conv)}`).catch(notFoundAsNull);
  }

  eraseUser(uid: string, options: { scan: boolean }): Promise<EraseResult> {
    return this.call('DELETE', `/v1/users/${encodeURIComponent(uid)}${options.scan ? '?scan=1' : ''}`);
  }

  traces(uid: string): Promise<{ state: boolean; listedIn: string[] }> {
    return this.call('GET', `/v1/admin/users/${encodeURIComponent(uid)}/traces`);
  }

  deleteConversation(conv: string): Promise<DeleteResult | null> {
    return this.call<DeleteResult>('DELETE', `/v1/conversations/${encodeURIComponent(conv)}`).catch(notFoundAsNull);
  }

  reassertHeads(heads: readonly HeadAssertion[]): Promise<HeadsResult> {
    return this.call('PUT', '/v1/heads', { heads });
  }

  importBatch(batch: ImportBatch, dryRun: boolean): Promise<ImportBatchResult> {
    return this.call('POST', '/v1/admin/import', { ...batch, dryRun });
  }

  async heads(convs: readonly string[]): Promise<Record<string, number>> {
    return (await this.call<{ heads: Record<string, number> }>('POST', '/v1/admin/heads', { convs })).heads;
  }

  resetRead(uid: string, conv: string, seq?: number): Promise<ResetReadResult> {
    return this.call('PUT', `/v1/users/${encodeURIComponent(uid)}/conversations/${encodeURIComponent(conv)}/read`, seq === undefined ? {} : { seq });
  }

  rebase(conv: string, seq: number): Promise<RebaseResult | null> {
    return this.call<RebaseResult>('POST', `/v1/admin/conversations/${encodeURIComponent(conv)}/rebase`, { seq }).catch(notFoundAsNull);
  }

  async close(): Promise<void> {}

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.apiKey}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(this.base + path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const text = await res.text();
    if (res.status !== 200) {
      let code = 'error';
      let message = text;
      try {
        const parsed = JSON.parse(text) as { error?: { code?: string; message?: string } };
        code = parsed.error?.code ?? code;
        message = parsed.error?.message ?? message;
      } catch {
        // not a Redpoint error body
      }
      throw new HttpError(res.status, code, `${method} ${path}: ${res.status} ${code}: ${message}`);
    }
    return JSON.parse(text) as T;
  }
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

function notFoundAsNull(err: unknown): null {
  if (err instanceof HttpError && err.code === 'unknown_conversation') return null;
  throw err;
}
