import { messageConv, parseChild, topicConv } from '../../protocol/child-id.js';
import { RedpointError } from '../../protocol/errors.js';
import { LIMITS } from '../../protocol/limits.js';
import type { MessageEvent } from '../../protocol/types.js';
import type { Engine } from '../engine/engine.js';
import { afterPartOfIt } from '../engine/store-errors.js';
import { unknownConversation } from './conversation-errors.js';
import { applyMembersStep } from './membership.js';

/**
 * Topics (PROTOCOL.md "Topics"): a topic is the child conversation `<conv>#t:<topic>`, whose
 * members are always its parent's. Two operations keep that exact under any interleaving, each
 * idempotent and retried by its caller until it succeeds:
 *
 * - a topic's message, until its child is known complete: (1) register the topic (capped),
 *   (2) sync the child from the parent's roster, (3) mark it complete; then it is recorded;
 * - a membership change of the parent: (1) change the parent, (2) read the registry, (3) sync
 *   every registered topic's child: with the change itself where the child holds the roster the
 *   change was made from (a delta, MembersChange.syncFrom), else from the parent's roster.
 *
 * A sync reads the parent's roster with its generation in one step and sets the child's member
 * set to it in one step of the child, unless the child already holds a roster of a newer
 * generation (MembersChange.sync): whichever order two syncs land in, the newer roster wins.
 * Every parent change after a topic's (1) reaches the child through its own (3) (its (2) sees
 * the topic); every change before it is in the roster the topic's (2) reads. A crash anywhere
 * leaves the topic not marked complete, or the parent change unanswered: the retry syncs again.
 * The leaves a sync removes are applied by the step that removed them; a change's retry
 * reports its own removals again even when its sync is stale.
 */

/** Messages naming a `topic` go to its child conversation (the one place a message's topic is mapped). */
export function toTopicConvs(messages: readonly MessageEvent[]): readonly MessageEvent[] {
  if (!messages.some((m) => m.topic !== undefined)) return messages;
  return messages.map((m) => {
    if (m.topic === undefined) return m;
    const { topic: _mapped, ...rest } = m;
    return { ...rest, conv: messageConv(m) };
  });
}

/**
 * Before `messages` are recorded: each topic they name is registered and its child complete.
 * An unknown parent is `unknown_conversation`; a topic beyond LIMITS.topicsPerConversation is
 * `limit_exceeded` (that topic is not registered, and no message of the request is recorded).
 */
export async function openTopics(engine: Engine, threshold: number, messages: readonly MessageEvent[]): Promise<void> {
  const named = new Map<string, { parent: string; topic: string }>();
  for (const m of messages) {
    if (m.conv.indexOf('#') < 0 || named.has(m.conv)) continue;
    const child = parseChild(m.conv);
    if (child) named.set(m.conv, child);
  }
  if (named.size === 0) return;
  await Promise.all([...named.values()].map(({ parent, topic }) => openTopic(engine, threshold, parent, topic)));
}

async function openTopic(engine: Engine, threshold: number, parent: string, topic: string): Promise<void> {
  const outcome = await engine.addTopic(parent, topic, LIMITS.topicsPerConversation);
  if (outcome === 'ready') return;
  if (outcome === 'unknown') throw unknownConversation([parent]);
  if (outcome === 'full') {
    throw new RedpointError(
      'limit_exceeded',
      `${parent} has ${LIMITS.topicsPerConversation} topics already (LIMITS.topicsPerConversation): topic ${topic} was not created and no message of this request was recorded`,
    );
  }
  try {
    await syncTopics(engine, threshold, parent, [topic], []);
    await engine.topicReady(parent, topic);
  } catch (err) {
    throw afterPartOfIt(err);
  }
}

/** A membership change of a parent as it landed: what it asked, and the parent's generations around its step. */
export interface LandedChange {
  add: readonly string[];
  remove: readonly string[];
  category?: string;
  gens: { from: number; to: number };
}

/**
 * After a membership change of `parent` landed (its step (1)): every registered topic's child
 * takes it; returns the topics. As a delta where the child holds the parent's roster of the
 * change's `gens.from` (or of `gens.to` already: a retry): the change's own adds and removals,
 * O(change) instead of O(members) per topic. A child holding an older roster (a sync of an earlier
 * change has not landed yet, or it was lost) answers `behind` and is synced whole from the
 * parent's roster, as a topic's first message does. The '#P' guard orders both kinds: a delta
 * landing after a newer roster changes nothing, and a late delta cannot apply to a roster it was
 * not made from. The change's removals are reported as leaves again even when a newer sync already
 * removed them (a retry's user steps then land).
 */
export async function inheritMembership(engine: Engine, threshold: number, parent: string, change: LandedChange): Promise<string[]> {
  const topics = await engine.topics(parent).catch((err: unknown) => {
    throw afterPartOfIt(err);
  });
  if (topics.length === 0) return topics;
  try {
    const behind: string[] = [];
    await Promise.all(
      topics.map(async (topic) => {
        const child = topicConv(parent, topic);
        const step = await engine.changeMembers(child, {
          add: change.add,
          remove: change.remove,
          ...(change.category !== undefined ? { category: change.category } : {}),
          threshold,
          sync: change.gens.to,
          syncFrom: change.gens.from,
        });
        if (step.behind) behind.push(topic);
        else await applyMembersStep(engine, child, step);
      }),
    );
    if (behind.length > 0) await syncTopics(engine, threshold, parent, behind, change.remove);
  } catch (err) {
    throw afterPartOfIt(err);
  }
  return topics;
}

async function syncTopics(engine: Engine, threshold: number, parent: string, topics: readonly string[], removed: readonly string[]): Promise<void> {
  const roster = await engine.roster(parent);
  if (!roster) throw unknownConversation([parent]);
  const add = roster.members.map((m) => m.uid);
  const members = new Set(add);
  const remove = removed.filter((uid) => !members.has(uid));
  await Promise.all(
    topics.map(async (topic) => {
      const child = topicConv(parent, topic);
      const step = await engine.changeMembers(child, { add, remove, category: roster.info.category, threshold, sync: roster.info.gen });
      await applyMembersStep(engine, child, step);
    }),
  );
}
