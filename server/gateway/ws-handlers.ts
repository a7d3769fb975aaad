import { RedpointError } from '../../protocol/errors.js';
import type { ClientFrame, HelloFrame, PullFrame, ReadFrame, SettingsFrame } from '../../protocol/frames.js';
import type { Cursor } from '../../protocol/types.js';
import { wireError } from './error-mapper.js';
import type { Socket, WsGateway } from './ws-gateway.js';

/** One client frame, after validation. Errors become error frames (or a close for auth). */
export async function handleFrame(gw: WsGateway, ws: Socket, frame: ClientFrame): Promise<void> {
  const conn = ws.getUserData();
  if (frame.t === 'hello') {
    // Checked and set before any await: two hellos in a row must not both authenticate.
    if (conn.hello) return gw.close(ws, 'protocol_error');
    conn.hello = hello(gw, ws, frame);
    return conn.hello;
  }
  if (!conn.hello) return gw.close(ws, 'protocol_error');
  // A frame sent right after hello (not waiting for welcome) is answered once hello is done.
  if (!conn.uid) await conn.hello;
  const uid = conn.uid;
  if (!uid || conn.closed) return;
  try {
    switch (frame.t) {
      case 'pull':
        return await pull(gw, ws, uid, frame);
      case 'read':
        return await read(gw, ws, uid, frame);
      case 'settings':
        return await settings(gw, ws, uid, frame);
    }
  } catch (err) {
    const e = wireError(err, { write: frame.t !== 'pull', transport: 'ws', log: gw.log, metrics: gw.metrics, fields: { conn: conn.id, frame: frame.t } });
    gw.send(ws, { t: 'error', id: frame.id, code: e.code, message: e.message });
  }
}

async function hello(gw: WsGateway, ws: Socket, frame: HelloFrame): Promise<void> {
  const conn = ws.getUserData();
  let uid: string;
  try {
    uid = await gw.authenticate(ws, frame.token, frame.device);
  } catch (err) {
    const expired = err instanceof RedpointError && err.code === 'token_expired';
    gw.metrics.errors.inc({ code: expired ? 'token_expired' : 'unauthorized' });
    return gw.close(ws, expired ? 'token_expired' : 'unauthorized');
  }
  if (conn.closed) return;
  gw.send(ws, { t: 'welcome', uid, connId: conn.id, versionEvery: gw.options.versionEverySeconds });
  try {
    await sendPage(gw, ws, uid, frame.cursor ?? null, undefined, undefined);
  } catch (err) {
    gw.log.error({ err, conn: conn.id }, 'initial sync failed');
    gw.send(ws, { t: 'error', code: 'unavailable', message: 'initial sync failed; pull to retry' });
  }
}

async function pull(gw: WsGateway, ws: Socket, uid: string, frame: PullFrame): Promise<void> {
  await sendPage(gw, ws, uid, frame.since ?? null, frame.limit, frame.id);
}

async function sendPage(gw: WsGateway, ws: Socket, uid: string, since: Cursor | null, limit: number | undefined, id: number | undefined): Promise<void> {
  const reply = await gw.sync.pull(uid, since, limit);
  gw.metrics.pulls.inc({ kind: reply.snapshot ? 'snapshot' : 'delta', transport: 'ws' });
  gw.metrics.streamLength.observe(reply.entries.length);
  // Subscribe before sending, so no head published after this reply can be missed.
  await gw.followHeads(ws, reply.heads);
  gw.send(ws, { t: 'sync', ...(id !== undefined ? { id } : {}), ...reply });
}

async function read(gw: WsGateway, ws: Socket, uid: string, frame: ReadFrame): Promise<void> {
  const result = await gw.sync.readBatch(uid, frame.reads);
  gw.send(ws, {
    t: 'ack',
    id: frame.id,
    epoch: result.epoch,
    version: result.version,
    ...(result.rejected.length > 0 ? { rejected: result.rejected.map((conv) => ({ conv, code: 'unknown_conversation' })) } : {}),
  });
}

async function settings(gw: WsGateway, ws: Socket, uid: string, frame: SettingsFrame): Promise<void> {
  let result;
  if (frame.deleted) {
    result = await gw.sync.deleteConversation(uid, frame.conv);
  }
  if (frame.muted !== undefined || frame.markedUnread !== undefined) {
    result = await gw.sync.updateSettings(uid, frame.conv, {
      ...(frame.muted !== undefined ? { muted: frame.muted } : {}),
      ...(frame.markedUnread !== undefined ? { markedUnread: frame.markedUnread } : {}),
    });
  }
  if (!result) throw new RedpointError('invalid_request', 'settings: nothing to change');
  gw.send(ws, { t: 'ack', id: frame.id, epoch: result.epoch, version: result.version });
}
