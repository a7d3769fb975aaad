import { describe, expect, it } from 'vitest';
import { ConvStore } from '../../client-demo/sdk/src/store.js';
import type { ConvEntry, ConvState, PullReply } from '../../protocol/types.js';

/**
 * The sync rules of PROTOCOL.md as the client's store applies them, on replies shaped exactly as
 * the server sends them. A reply and pushes race on a real socket only by chance; here each
 * ordering is made on purpose.
 */
const EPOCH = 'e1';

function conv(id: string, fields: Partial<ConvState> = {}): ConvState {
  return { conv: id, lastSeq: 0, readSeq: 0, mentions: 0, muted: false, markedUnread: false, category: 'default', large: false, deletedSeq: -1, ...fields };
}

function reply(fields: Partial<PullReply>): PullReply {
  return { epoch: EPOCH, entries: [], version: 0, more: false, heads: {}, ...fields };
}

const entry = (v: number, state: ConvState): ConvEntry => ({ v, conv: state.conv, state });
const push = (v: number, state: ConvState | null, convId = state?.conv ?? '') => ({ t: 'change' as const, epoch: EPOCH, v, conv: convId, state });
const lastSeqOf = (store: ConvStore, id: string) => store.view().conversations.find((c) => c.conv === id)?.lastSeq;

/** A store at version 3: the first sync brought version 1, pushes 2 and 3 followed. */
function storeAtThree(): ConvStore {
  const store = new ConvStore();
  store.applyReply(reply({ snapshot: { v: 0, convs: [] }, entries: [entry(1, conv('dm', { lastSeq: 1 }))], version: 1 }));
  store.applyChange(push(2, conv('dm', { lastSeq: 2 })));
  store.applyChange(push(3, conv('dm', { lastSeq: 3 })));
  return store;
}

describe('a sync reply read before pushes the client already applied', () => {
  it('a delta page below the client version changes nothing but heads, and never moves the cursor back', () => {
    const store = storeAtThree();
    store.applyReply(reply({ entries: [entry(2, conv('dm', { lastSeq: 2 }))], version: 2 }));
    expect(store.cursor).toEqual({ epoch: EPOCH, version: 3 });
    expect(lastSeqOf(store, 'dm')).toBe(3);
  });

  it('a snapshot page of the same epoch below the client version is not applied either', () => {
    const store = storeAtThree();
    store.applyReply(reply({ snapshot: { v: 2, convs: [conv('dm', { lastSeq: 2 })] }, version: 2 }));
    expect(store.cursor).toEqual({ epoch: EPOCH, version: 3 });
    expect(lastSeqOf(store, 'dm')).toBe(3);
  });

  it('a page that goes further skips its entries at or below the client version', () => {
    const store = storeAtThree();
    store.applyReply(
      reply({
        entries: [entry(2, conv('dm', { lastSeq: 2 })), entry(3, conv('dm', { lastSeq: 3, readSeq: 3 })), entry(4, conv('other', { lastSeq: 1 }))],
        version: 4,
      }),
    );
    expect(store.cursor).toEqual({ epoch: EPOCH, version: 4 });
    // v3 of the page is skipped: the client's own v3 stands (readSeq 0, three unread).
    expect(store.view().conversations.map((c) => [c.conv, c.lastSeq, c.unread])).toEqual([
      ['dm', 3, 3],
      ['other', 1, 1],
    ]);
  });

  it('a page of another epoch replaces everything, even at a lower version', () => {
    const store = storeAtThree();
    store.applyReply(reply({ epoch: 'e2', snapshot: { v: 0, convs: [] }, entries: [entry(1, conv('new', { lastSeq: 1 }))], version: 1 }));
    expect(store.cursor).toEqual({ epoch: 'e2', version: 1 });
    expect(store.view().conversations.map((c) => c.conv)).toEqual(['new']);
  });
});

describe('heads of read-diffused groups', () => {
  const big = (fields: Partial<ConvState> = {}) => conv('big', { large: true, category: 'group', ...fields });

  it('are max-merged: a page read before a head push does not lower the head, with or without a snapshot', () => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 1, convs: [big()] }, version: 1, heads: { big: 5 } }));
    store.applyHead({ t: 'head', conv: 'big', lastSeq: 7 });
    store.applyReply(reply({ version: 1, heads: { big: 6 } }));
    expect(lastSeqOf(store, 'big')).toBe(7);
    store.applyReply(reply({ snapshot: { v: 1, convs: [big()] }, version: 1, heads: { big: 6 } }));
    expect(lastSeqOf(store, 'big')).toBe(7);
    store.applyReply(reply({ version: 1, heads: { big: 9 } }));
    expect(lastSeqOf(store, 'big')).toBe(9);
  });

  it('an older page still brings newer heads', () => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 2, convs: [big()] }, version: 2, heads: { big: 1 } }));
    store.applyReply(reply({ version: 1, heads: { big: 4 } }));
    expect(store.cursor?.version).toBe(2);
    expect(lastSeqOf(store, 'big')).toBe(4);
  });

  it('are dropped with their conversation', () => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 1, convs: [big()] }, version: 1, heads: { big: 5 } }));
    store.applyChange(push(2, null, 'big'));
    expect(store.toCache([], 0).heads).toEqual([]);
    store.applyReply(reply({ snapshot: { v: 1, convs: [big()] }, version: 3, heads: { big: 5 } }));
    store.applyReply(reply({ snapshot: { v: 4, convs: [] }, version: 4, heads: { big: 5 } }));
    expect(store.toCache([], 0).heads).toEqual([]);
  });

  it('of another epoch replace the old ones (a new history)', () => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 1, convs: [big()] }, version: 1, heads: { big: 9 } }));
    store.applyReply(reply({ epoch: 'e2', snapshot: { v: 1, convs: [big()] }, version: 1, heads: { big: 3 } }));
    expect(lastSeqOf(store, 'big')).toBe(3);
  });
});

describe("a read-diffused group's extras (issue 43: headAt, mentionAll, nocount)", () => {
  const big = (fields: Partial<ConvState> = {}) => conv('big', { large: true, category: 'group', ...fields });
  const row = (store: ConvStore) => store.view().conversations.find((c) => c.conv === 'big');

  it("a head push's recall and @all reach the count at once, and a page read before the push does not take them back", () => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 1, convs: [big()] }, version: 1, heads: { big: 2 } }));
    expect(row(store)).toMatchObject({ unread: 2, mentions: 0 });
    // seq 3 recalls seq 2; seq 4 is an @all (PROTOCOL.md: the push carries what they add).
    store.applyHead({ t: 'head', conv: 'big', lastSeq: 3, nocount: [2, 3] });
    store.applyHead({ t: 'head', conv: 'big', lastSeq: 4, mentionAll: [4], headAt: 1_700_000_000_000 });
    expect(row(store)).toMatchObject({ lastSeq: 4, unread: 2, mentions: 1, at: 1_700_000_000_000 });
    // A page read before those pushes, arriving after them.
    store.applyReply(reply({ version: 1, heads: { big: 2 } }));
    expect(row(store)).toMatchObject({ lastSeq: 4, unread: 2, mentions: 1 });
    // The next page has them all: nothing counts twice.
    store.applyReply(reply({ version: 1, heads: { big: 4 }, nocount: { big: [2, 3] }, mentionAll: { big: [4] }, headAt: { big: 1_700_000_000_000 } }));
    expect(row(store)).toMatchObject({ lastSeq: 4, unread: 2, mentions: 1 });
  });

  it('are dropped when the conversation goes back to write diffusion, and with another epoch', () => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 1, convs: [big()] }, version: 1, heads: { big: 4 }, mentionAll: { big: [4] } }));
    expect(row(store)).toMatchObject({ mentions: 1 });
    // Back to write diffusion: the state carries what counts; the kept @all stops counting (PROTOCOL.md).
    store.applyChange(push(2, conv('big', { lastSeq: 4, category: 'group' })));
    store.applyChange(push(3, big({ lastSeq: 4 })));
    expect(row(store)).toMatchObject({ mentions: 0 });
    store.applyHead({ t: 'head', conv: 'big', lastSeq: 5, mentionAll: [5] });
    expect(row(store)).toMatchObject({ mentions: 1 });
    store.applyReply(reply({ epoch: 'e2', snapshot: { v: 1, convs: [big({ lastSeq: 5 })] }, version: 1, heads: { big: 5 } }));
    expect(row(store)).toMatchObject({ mentions: 0 });
  });

  it('a push for a conversation the client does not hold yet is left to a pull (applyHead says so: the session pulls)', () => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 1, convs: [] }, version: 1 }));
    expect(store.applyHead({ t: 'head', conv: 'big', lastSeq: 3, mentionAll: [3] })).toBe(false);
    store.applyChange(push(2, big({ lastSeq: 0 })));
    expect(row(store)).toMatchObject({ mentions: 0 });
  });
});

describe("this device's settings, shown before the server has them", () => {
  it('follow the server\'s order: a delete clears "marked unread", a mark made after the delete stays', () => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 1, convs: [conv('dm', { lastSeq: 3 })] }, version: 1 }));
    store.optimisticSettings('dm', { markedUnread: true });
    store.optimisticSettings('dm', { deleted: true });
    expect(store.effective('dm')).toMatchObject({ markedUnread: false, deletedSeq: 3, readSeq: 3 });
    store.optimisticSettings('dm', { markedUnread: true });
    expect(store.effective('dm')).toMatchObject({ markedUnread: true, deletedSeq: 3 });
    expect(store.view().conversations).toEqual([]);
  });
});

describe('the read position (readGen, readSeq): "unread from here"', () => {
  const view = (store: ConvStore) => store.view().conversations.find((c) => c.conv === 'dm');
  const readAtTen = (): ConvStore => {
    const store = new ConvStore();
    store.applyReply(reply({ snapshot: { v: 1, convs: [conv('dm', { lastSeq: 10, readSeq: 10 })] }, version: 1 }));
    return store;
  };

  it("another device's unread-from arrives as a lower readSeq under a newer generation: it replaces the state, and this device's pending read of the older generation does not hide it", () => {
    const store = readAtTen();
    store.applyChange(push(2, conv('dm', { lastSeq: 12, readSeq: 10 })));
    // This device read to 12 in generation 0; before its ack, the other device's act lands.
    store.optimisticRead('dm', 12, 0);
    expect(view(store)).toMatchObject({ readSeq: 12, unread: 0 });
    store.applyChange(push(3, conv('dm', { lastSeq: 12, readSeq: 4, readGen: 1 })));
    expect(view(store)).toMatchObject({ readSeq: 4, unread: 8 });
    expect(store.overlays).toBe(0);
  });

  it("this device's unread-from shows at once, until the server's state has its generation; a read made after it raises again", () => {
    const store = readAtTen();
    store.optimisticUnreadFrom('dm', 6, 1);
    expect(view(store)).toMatchObject({ readSeq: 5, unread: 5 });
    expect(store.readGen('dm')).toBe(1);
    // A server state from before it (generation 0) does not bring the old position back.
    store.applyChange(push(2, conv('dm', { lastSeq: 11, readSeq: 10 })));
    expect(view(store)).toMatchObject({ readSeq: 5, unread: 6 });
    store.optimisticRead('dm', 8, 1);
    expect(view(store)).toMatchObject({ readSeq: 8, unread: 3 });
    store.ackSettings('dm', { epoch: EPOCH, version: 3 });
    store.applyChange(push(3, conv('dm', { lastSeq: 11, readSeq: 5, readGen: 1 })));
    expect(view(store)).toMatchObject({ readSeq: 8, unread: 3 });
  });
});
