import type { ErrorFrame } from '../../../protocol/frames.js';
import { ClosedError } from './publisher.js';

/**
 * The client gave up because the server kept refusing its tokens: `ready()` rejects with it, the
 * `error` event carries it, and `state.connection` is `auth_failed` until `reconnect()`.
 */
export class AuthError extends ClosedError {
  /** The server's error code: `unauthorized` or `token_expired`. */
  readonly code: string;
  /** Which credential check failed (PROTOCOL.md, "Credential checks"), when the server said. */
  readonly check: ErrorFrame['check'];
  /** Refused hellos in a row behind this (1 for a 4002: the server says not to retry that token). */
  readonly attempts: number;
  declare readonly closeCode: number;

  constructor(closeCode: number, attempts: number, refusal: ErrorFrame | null, fallbackCode: string) {
    const code = refusal?.code ?? fallbackCode;
    const detail = refusal ? `${code}${refusal.check ? ` (${refusal.check})` : ''}: ${refusal.message}` : `${code} (close code ${closeCode})`;
    super(
      `authentication failed ${attempts === 1 ? 'once' : `${attempts} times in a row`}: ${detail}; call reconnect() once token() returns a valid token`,
      closeCode,
    );
    this.name = 'AuthError';
    this.code = code;
    this.check = refusal?.check;
    this.attempts = attempts;
  }
}
