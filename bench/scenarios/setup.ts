import type { PushClient, PushSink } from '../clients/types.js';
import { eachLimited, type HttpTarget } from '../lib/http.js';
import type { NotifyScenario } from '../lib/results.js';
import type { RunningSystem } from '../systems.js';

/** Ids of one scenario's users and conversations; `tag` keeps scenarios apart on a shared server. */
export interface Population {
  clientUids: string[];
  /** The conversation of message i, and its sender. */
  convOf(i: number): string;
  senderOf(i: number): string;
}

const SETUP_CONCURRENCY = 16;
const CONNECT_CONCURRENCY = 50;

export const userId = (tag: string, i: number): string => `${tag}-u${i}`;
export const senderId = (tag: string, i: number): string => `${tag}-s${i}`;
export const directConv = (tag: string, i: number): string => `${tag}-d${i}`;

/** 1:1 conversations `d<i>` between client `u<i>` and an offline sender `s<i>`. */
export async function createDirectConversations(http: HttpTarget, tag: string, count: number): Promise<void> {
  const indexes = Array.from({ length: count }, (_, i) => i);
  await eachLimited(indexes, SETUP_CONCURRENCY, async (i) => {
    await http.expectOk('PUT', `/v1/conversations/${directConv(tag, i)}/members`, { add: [userId(tag, i), senderId(tag, i)] });
  });
}

/** Creates the scenario's conversations; messages then go round-robin over them. */
export async function populate(http: HttpTarget, scenario: NotifyScenario, tag: string): Promise<Population> {
  const clientUids = Array.from({ length: scenario.clients }, (_, i) => userId(tag, i));
  if (scenario.kind === '1to1') {
    await createDirectConversations(http, tag, scenario.clients);
    return { clientUids, convOf: (i) => directConv(tag, i % scenario.clients), senderOf: (i) => senderId(tag, i % scenario.clients) };
  }
  const conv = `${tag}-g`;
  const sender = senderId(tag, 0);
  const fillers = Array.from({ length: Math.max(0, scenario.groupSize - scenario.clients - 1) }, (_, i) => `${tag}-m${i}`);
  // One PUT above the threshold: the group is read-diffused from its first message.
  await http.expectOk('PUT', `/v1/conversations/${conv}/members`, { add: [sender, ...clientUids, ...fillers] });
  return { clientUids, convOf: () => conv, senderOf: () => sender };
}

/** Connects every client (bounded concurrency); any failure closes the others and rejects. */
export async function connectAll(system: RunningSystem, uids: readonly string[], sinkFor: (uid: string) => PushSink): Promise<PushClient[]> {
  const clients: PushClient[] = [];
  try {
    await eachLimited(uids, CONNECT_CONCURRENCY, async (uid) => {
      clients.push(await system.spec.connect(system.port, uid, sinkFor(uid)));
    });
  } catch (err) {
    for (const c of clients) c.close();
    throw err;
  }
  return clients;
}

/** The conversations of a mesh (engine-setup.ts directMesh), created over HTTP. */
export async function createMeshOverHttp(http: HttpTarget, convs: ReadonlyArray<{ conv: string; a: string; b: string }>): Promise<void> {
  await eachLimited(convs, SETUP_CONCURRENCY, async ({ conv, a, b }) => {
    await http.expectOk('PUT', `/v1/conversations/${conv}/members`, { add: [a, b] });
  });
}

/** POSTs messages in batches of `batch` (a few batches in flight), in order within each batch. */
export async function postInBatches(http: HttpTarget, messages: ReadonlyArray<{ conv: string; seq: number; sender: string }>, batch = 100): Promise<void> {
  const batches: Array<typeof messages> = [];
  for (let i = 0; i < messages.length; i += batch) batches.push(messages.slice(i, i + batch));
  await eachLimited(batches, 4, async (b) => {
    await http.expectOk('POST', '/v1/messages', { messages: b });
  });
}
