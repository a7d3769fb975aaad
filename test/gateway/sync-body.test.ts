import { describe, expect, it } from 'vitest';
import { decodeMsgpack } from '../../protocol/codec.js';
import type { ConvState, PullReply } from '../../protocol/types.js';
import { splitSnapshot } from '../../server/gateway/snapshot-parts.js';
import { syncBodyPieces } from '../../server/gateway/sync-body.js';

function state(i: number): ConvState {
  return { conv: `c${i}`, lastSeq: i, readSeq: 0, mentions: i % 3, muted: i % 5 === 0, markedUnread: false, category: 'default', large: false, deletedSeq: -1 };
}
function reply(convs: number, entries = 2): PullReply {
  return {
    epoch: 'e1',
    snapshot: { v: 7, convs: Array.from({ length: convs }, (_, i) => state(i)) },
    entries: Array.from({ length: entries }, (_, i) => ({ v: 8 + i, conv: `c${i}`, state: i === 0 ? null : state(i) })),
    version: 7 + entries,
    more: false,
    heads: { big: 3 },
  };
}
function joined(pieces: Iterable<string | Uint8Array>): { text: string; bytes: Uint8Array; count: number } {
  const list = [...pieces];
  const bytes = Buffer.concat(list.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));
  return { text: bytes.toString('utf8'), bytes, count: list.length };
}

describe('sync body pieces', () => {
  // 15/16 and 65,535/65,536 cross MessagePack's header sizes; 250/251 the piece size.
  for (const n of [0, 1, 15, 16, 250, 251, 1_000, 65_536]) {
    it(`${n} conversations: the pieces make exactly the reply, JSON and MessagePack`, () => {
      const r = reply(n);
      const json = joined(syncBodyPieces(r, false, 250));
      expect(JSON.parse(json.text)).toEqual(r);
      const pack = joined(syncBodyPieces(r, true, 250));
      expect(decodeMsgpack(pack.bytes)).toEqual(r);
      // Each 250 states a piece, then the rest of the reply; MessagePack's headers a piece of their own.
      expect(json.count).toBe(n <= 250 ? 1 : Math.ceil(n / 250) + 1);
      expect(pack.count).toBe(n <= 250 ? 1 : Math.ceil(n / 250) + 2);
    });
  }

  it('a reply without a snapshot is one piece', () => {
    const { snapshot: _none, ...r } = reply(0);
    expect(joined(syncBodyPieces(r, false)).count).toBe(1);
    expect(JSON.parse(joined(syncBodyPieces(r, false)).text)).toEqual(r);
  });
});

describe('splitSnapshot', () => {
  for (const n of [0, 250, 251, 500, 501]) {
    it(`${n} conversations: parts of 250 and a completing snapshot of 1..250, in order`, () => {
      const r = reply(n);
      const { parts, last } = splitSnapshot(r, 250);
      const all = [...parts.flat(), ...(last.snapshot?.convs ?? [])];
      expect(all).toEqual(r.snapshot?.convs);
      for (const p of parts) expect(p.length).toBe(250);
      if (n > 0) expect(last.snapshot?.convs.length).toBeGreaterThanOrEqual(1);
      expect(last.snapshot?.convs.length).toBeLessThanOrEqual(250);
      expect(parts.length).toBe(n <= 250 ? 0 : Math.ceil(n / 250) - 1);
      expect({ ...last, snapshot: undefined }).toEqual({ ...r, snapshot: undefined });
    });
  }
});
