import { RedpointError } from '../../protocol/errors.js';
import type { CorsOrigins } from '../cors-config.js';
import type { HttpRouter, Reply, RequestContext } from './http.js';

/**
 * CORS for the HTTP API (`/v1/*` and `/openapi.json`), so that browser pages on other origins
 * can call it. Off unless CORS_ORIGINS is set. Redpoint authenticates with `Authorization:
 * Bearer` headers, never cookies, so it never sends `Access-Control-Allow-Credentials`: a page
 * calls `fetch` with its default `credentials` ('same-origin') and sets the header itself; a
 * request made with `credentials: 'include'` is refused by the browser. For the same reason `*`
 * is safe to offer: no ambient credential rides along with a cross-origin request. The WebSocket
 * is not subject to CORS (its token travels in the first frame).
 */

const ALLOW_METHODS = 'GET, POST, PUT, DELETE';
const ALLOW_HEADERS = 'Authorization, Content-Type, X-Request-Id';
const EXPOSE_HEADERS = 'X-Request-Id, Retry-After';
/** Browsers cap it anyway (Chromium: 2 h); 10 min lets a change of CORS_ORIGINS show soon. */
const MAX_AGE_SECONDS = 600;

class CorsPolicy {
  private readonly allowed: ReadonlySet<string> | '*';

  constructor(origins: CorsOrigins) {
    this.allowed = origins === '*' ? '*' : new Set(origins);
  }

  allows(origin: string): boolean {
    return origin !== '' && (this.allowed === '*' || this.allowed.has(origin));
  }

  /** Headers of every API reply: the origin it may be shown to, and the headers a page may read. */
  replyHeaders(origin: string): Record<string, string> {
    // With a list, the reply depends on Origin: caches must not hand one origin's reply to another.
    const vary: Record<string, string> = this.allowed === '*' ? {} : { vary: 'Origin' };
    if (!this.allows(origin)) return vary;
    return { ...vary, 'access-control-allow-origin': this.allowed === '*' ? '*' : origin, 'access-control-expose-headers': EXPOSE_HEADERS };
  }

  /** The answer to a preflight (OPTIONS with Access-Control-Request-Method). */
  preflight(ctx: RequestContext): Reply {
    if (!this.allows(ctx.origin)) {
      throw new RedpointError('forbidden', ctx.origin === '' ? 'a CORS preflight needs an Origin header' : `origin ${ctx.origin} is not in CORS_ORIGINS`);
    }
    return {
      status: 204,
      body: null,
      text: { contentType: 'text/plain; charset=utf-8', content: '' },
      headers: {
        'access-control-allow-methods': ALLOW_METHODS,
        'access-control-allow-headers': ALLOW_HEADERS,
        'access-control-max-age': String(MAX_AGE_SECONDS),
      },
    };
  }
}

/** Whether a path belongs to what CORS covers: the API and its document, not the ops endpoints. */
function covered(url: string): boolean {
  return url.startsWith('/v1/') || url === '/openapi.json';
}

/** Answers preflights on `paths` and adds the CORS headers to every reply of a covered path. */
export function enableCors(router: HttpRouter, origins: CorsOrigins, paths: readonly string[]): void {
  const policy = new CorsPolicy(origins);
  router.responseHeaders = (ctx) => (covered(ctx.url) ? policy.replyHeaders(ctx.origin) : undefined);
  for (const path of paths.filter(covered)) {
    router.route('options', path, async (ctx) => policy.preflight(ctx), { name: 'cors_preflight' });
  }
}
