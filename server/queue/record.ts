import { Type } from '@sinclair/typebox';
import { RedpointError } from '../../protocol/errors.js';
import { ConvRef, checkMessageTimes, decode, Id, MembersBody, Message, type MessageInput, ReadBody, SettingsBody } from '../../protocol/schemas.js';
import type { NotificationLevel } from '../../protocol/types.js';

/**
 * A queued record (PROTOCOL.md "Queue records"): the JSON of one HTTP write with a `type` naming
 * it. Each is validated by the schema of the HTTP body it stands for, so a record the HTTP API
 * would refuse is refused here too, with the same message.
 */
export type QueueRecord =
  | { type: 'message'; message: MessageInput }
  | { type: 'members'; conv: string; add: string[]; remove: string[]; category?: string }
  | { type: 'read'; uid: string; conv: string; seq: number; gen?: number }
  | { type: 'settings'; uid: string; conv: string; muted?: boolean; markedUnread?: boolean; level?: NotificationLevel }
  | { type: 'delete'; uid: string; conv: string };

const RECORD_TYPES = ['message', 'members', 'read', 'settings', 'delete'] as const;

// A user operation's `conv` may name a topic (`<conv>#t:<topic>`, PROTOCOL.md "Topics"); a members record's may not.
const PathIds = { conv: Type.Object({ conv: Id }), convRef: Type.Object({ conv: ConvRef }), uid: Type.Object({ uid: Id }) };

/**
 * A parsed record, or `invalid_request` naming what is wrong (the record then goes to the dead
 * letter with that reason). Fields the HTTP API takes in its path (`conv` of `members`, `uid` of
 * `read`, `settings`, `delete`) are checked as path ids and taken out before the body's schema,
 * which refuses any field it does not know.
 */
export function decodeRecord(value: unknown): QueueRecord {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('(record): not a JSON object');
  const { type, ...rest } = value as Record<string, unknown>;
  switch (type) {
    case 'message':
      return { type, message: checkMessageTimes([decode(Message, rest)], Date.now())[0] as MessageInput };
    case 'members': {
      const { conv, ...body } = rest;
      const ids = decode(PathIds.conv, { conv });
      const members = decode(MembersBody, body);
      return {
        type,
        conv: ids.conv,
        add: members.add ?? [],
        remove: members.remove ?? [],
        ...(members.category !== undefined ? { category: members.category } : {}),
      };
    }
    case 'read': {
      const { uid, ...body } = rest;
      const ids = decode(PathIds.uid, { uid });
      const read = decode(ReadBody, body);
      return { type, uid: ids.uid, conv: read.conv, seq: read.seq, ...(read.gen !== undefined ? { gen: read.gen } : {}) };
    }
    case 'settings': {
      const { uid, conv, ...body } = rest;
      const ids = { ...decode(PathIds.uid, { uid }), ...decode(PathIds.convRef, { conv }) };
      const settings = decode(SettingsBody, body);
      return { type, ...ids, ...settings };
    }
    case 'delete': {
      const { uid, conv, ...body } = rest;
      const ids = { ...decode(PathIds.uid, { uid }), ...decode(PathIds.convRef, { conv }) };
      const extra = Object.keys(body);
      if (extra.length > 0) throw invalid(`/${extra[0]}: unexpected property`);
      return { type, ...ids };
    }
    default:
      throw invalid(`/type: must be one of ${RECORD_TYPES.join(', ')} (got ${JSON.stringify(type) ?? 'nothing'})`);
  }
}

/** Raw bytes of a queue message (JetStream, Kafka): JSON text, or `bad_json` with the parser's reason. */
export function parseRecordBytes(data: Uint8Array): unknown {
  const text = new TextDecoder('utf-8', { fatal: true });
  let json: string;
  try {
    json = text.decode(data);
  } catch {
    throw new RedpointError('bad_json', '(record): not UTF-8 text');
  }
  try {
    return JSON.parse(json) as unknown;
  } catch (err) {
    throw new RedpointError('bad_json', `(record): not JSON: ${(err as Error).message}`);
  }
}

/**
 * The conversation a record belongs to: records of one conversation that do not commute (a
 * membership change, settings, a delete) are applied in queue order against the others of it.
 */
export function conversationOf(record: QueueRecord): string {
  return record.type === 'message' ? record.message.conv : record.conv;
}

/** Messages and reads are max-merges: any order gives the same state. The rest do not commute. */
export function commutes(record: QueueRecord): boolean {
  return record.type === 'message' || record.type === 'read';
}

function invalid(message: string): RedpointError {
  return new RedpointError('invalid_request', message);
}
