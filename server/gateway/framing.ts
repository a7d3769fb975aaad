import type { HttpRequest } from './uws.js';

/** The largest body length uWebSockets.js can hold (an unsigned 32-bit count): a longer one would wrap. */
const MAX_CONTENT_LENGTH = 0xffff_ffff;

/**
 * Why this request's body length is ambiguous (RFC 9112 §6.3), or undefined when it is not.
 * uWebSockets.js reads the first Content-Length and ignores the rest, and takes repeated or
 * stacked Transfer-Encodings; a proxy in front that frames the same bytes otherwise (the last
 * Content-Length, chunked) would send one request whose body we read as a second one: request
 * smuggling. The faults uWS's parser refuses itself (Content-Length with Transfer-Encoding, a
 * Transfer-Encoding without chunked, a Content-Length that is not digits) never reach a route;
 * they are checked here too, so a uWS build that lets them through is still safe.
 *
 * Identical repeated Content-Length fields, which RFC 9110 §8.6 lets a server accept, are refused
 * as well: no client has a reason to send them, and a proxy may have merged or split them.
 */
export function framingFault(req: HttpRequest): string | undefined {
  let lengths = 0;
  let encodings = 0;
  let length = '';
  let encoding = '';
  // uWS gives header names lower-cased, each field separately (repeats included).
  req.forEach((name, value) => {
    if (name === 'content-length') {
      lengths++;
      length = value;
    } else if (name === 'transfer-encoding') {
      encodings++;
      encoding = value;
    }
  });
  if (lengths === 0 && encodings === 0) return undefined;
  if (lengths > 1) return 'repeated Content-Length header: send exactly one';
  if (encodings > 1) return 'repeated Transfer-Encoding header: send one, "chunked"';
  if (encodings === 1 && lengths === 1) return 'Content-Length together with Transfer-Encoding: send one of them';
  if (encodings === 1) return encoding.toLowerCase() === 'chunked' ? undefined : `Transfer-Encoding "${encoding}": only "chunked" is accepted`;
  if (!/^[0-9]+$/.test(length) || Number(length) > MAX_CONTENT_LENGTH) return `Content-Length "${length}" is not a byte count`;
  return undefined;
}
