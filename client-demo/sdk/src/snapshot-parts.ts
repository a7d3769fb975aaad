import type { SyncFrame, SyncPartFrame } from '../../../protocol/frames.js';

type Key = number | 'hello';

/**
 * PROTOCOL.md "Snapshots in parts": a large snapshot arrives as `sync-part` frames followed by the
 * `sync` with the same id (none: the hello's sync) that completes it. The parts are held here,
 * and the completing sync is handed on as one whole reply: nothing is applied from a part alone.
 */
export class SnapshotParts {
  private readonly held = new Map<Key, { v: number; convs: SyncPartFrame['convs'] }>();

  add(part: SyncPartFrame): void {
    const key = part.id ?? 'hello';
    const held = this.held.get(key);
    // A part of another snapshot version under the same id starts over (a new reply).
    if (held && held.v === part.v) held.convs.push(...part.convs);
    else this.held.set(key, { v: part.v, convs: [...part.convs] });
  }

  /**
   * The whole reply for `sync`: itself when no parts wait for its id; null when parts wait but
   * the sync does not complete them (no snapshot, another version): the reply is unusable, the
   * caller drops it (the client pulls again).
   */
  complete(sync: SyncFrame): SyncFrame | null {
    const key = sync.id ?? 'hello';
    const held = this.held.get(key);
    if (!held) return sync;
    this.held.delete(key);
    if (!sync.snapshot || sync.snapshot.v !== held.v) return null;
    return { ...sync, snapshot: { v: held.v, convs: [...held.convs, ...sync.snapshot.convs] } };
  }
}
