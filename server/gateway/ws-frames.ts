import { decodeJson, decodeMsgpack } from '../../protocol/codec.js';
import { RedpointError } from '../../protocol/errors.js';
import { CLIENT_FRAME_SCHEMAS, type ClientFrame } from '../../protocol/frames.js';
import { LIMITS } from '../../protocol/limits.js';
import { decode } from '../../protocol/schemas.js';

/**
 * A frame that could not be accepted. `id` is the request id it carried when it parsed as a map
 * with a usable one: its error goes back with that id (so the client waiting on it is answered),
 * and it is a bad request rather than a malformed frame.
 */
export class FrameError extends RedpointError {
  constructor(
    code: RedpointError['code'],
    message: string,
    readonly id: number | undefined,
  ) {
    super(code, message);
  }
}

/** An id a reply can carry: what the request schemas accept (RequestId in protocol/frames.ts). */
function usableId(value: object): number | undefined {
  if (!('id' in value) || ('t' in value && value.t === 'hello')) return undefined;
  const id = value.id;
  return typeof id === 'number' && Number.isInteger(id) && id >= 0 && id <= LIMITS.requestIdMax ? id : undefined;
}

const textDecoder = new TextDecoder('utf-8', { fatal: true });

/** Decodes and validates one client frame; returns (not throws) the error, to keep the hot path flat. */
export function parseClientFrame(message: ArrayBuffer, isBinary: boolean): ClientFrame | FrameError {
  let id: number | undefined;
  try {
    let value: unknown;
    if (isBinary) {
      value = decodeMsgpack(new Uint8Array(message));
    } else {
      let text: string;
      try {
        text = textDecoder.decode(message);
      } catch {
        throw new RedpointError('bad_json', 'text frame is not valid UTF-8');
      }
      value = decodeJson(text);
    }
    if (typeof value !== 'object' || value === null || !('t' in value) || typeof value.t !== 'string') {
      throw new RedpointError('invalid_request', 'a frame is an object with a string type tag `t`');
    }
    id = usableId(value);
    if (value.t === 'hello' && (!('token' in value) || typeof value.token !== 'string' || value.token === '')) {
      throw new RedpointError('unauthorized', 'hello without a token: send the user token (JWT) as `token`');
    }
    const schema = CLIENT_FRAME_SCHEMAS[value.t as keyof typeof CLIENT_FRAME_SCHEMAS];
    if (!schema) throw new RedpointError('invalid_request', `unknown frame type ${JSON.stringify(value.t).slice(0, 40)}`);
    return decode(schema, value) as ClientFrame;
  } catch (err) {
    if (err instanceof RedpointError) return new FrameError(err.code, err.message, id);
    return new FrameError('bad_json', 'undecodable frame', undefined);
  }
}
