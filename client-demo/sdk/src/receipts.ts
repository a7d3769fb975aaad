/**
 * Read receipts as the client holds them (PROTOCOL.md "Read receipts"): the peer's read position
 * of each one-to-one conversation (pull replies' `peerReads`) and the other members' positions of
 * small conversations (`reads` frames). Positions only rise ("has seen up to"), so a value is
 * max-merged whichever arrives first; a `reads` frame replaces its conversation's list (the
 * server sends the latest whole list), and a member who left or stopped sharing drops out then.
 * Nothing here is part of the synced state or its cache: it is refreshed by every pull and push.
 */
export class ReceiptsView {
  /** conv → uid → position, from `reads` frames. */
  private readonly lists = new Map<string, Map<string, number>>();
  /** conv → the one-to-one peer's position, from pulls. */
  private readonly peers = new Map<string, number>();

  /** A pull reply's `peerReads`; the conversations that changed. */
  applyPeers(peerReads: Readonly<Record<string, number>> | undefined): string[] {
    const changed: string[] = [];
    for (const [conv, seq] of Object.entries(peerReads ?? {})) {
      if ((this.peers.get(conv) ?? -1) >= seq) continue;
      this.peers.set(conv, seq);
      changed.push(conv);
    }
    return changed;
  }

  /** A `reads` frame: the other members' positions in `conv` now. */
  applyReads(conv: string, members: number, reads: Readonly<Record<string, number>>): void {
    const list = new Map(Object.entries(reads));
    this.lists.set(conv, list);
    if (members !== 2) return;
    // A one-to-one chat: the frame holds the peer's position, or nothing (they stopped sharing).
    const [peer] = list.values();
    if (peer === undefined) this.peers.delete(conv);
    else this.peers.set(conv, Math.max(peer, this.peers.get(conv) ?? 0));
  }

  /** The peer's read position in a one-to-one conversation (undefined: not known, or not shared). */
  peerRead(conv: string): number | undefined {
    return this.peers.get(conv);
  }

  /** How many other members are known to have read `seq` of `conv` (from `reads` frames: conversations of at most RECEIPTS_DETAIL_MEMBERS members). */
  readBy(conv: string, seq: number): number {
    let n = 0;
    for (const at of this.lists.get(conv)?.values() ?? []) if (at >= seq) n++;
    return n;
  }

  clear(): void {
    this.lists.clear();
    this.peers.clear();
  }
}
