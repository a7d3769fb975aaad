import { describe, expect, it } from 'vitest';
import type { ServerFrame } from '../../protocol/frames.js';
import { keyedRandom, mulberry32 } from '../helpers/prng.js';
import { sdkSuite } from './harness.js';
import { newTap, tapped } from './tap.js';
import { convergedTo } from './wait.js';

const { h, client } = sdkSuite({ largeGroupThreshold: 3, ws: { versionEverySeconds: 1 } });

/**
 * Replayable from its seed (REDPOINT_SDK_SEED=N replays a run): the script of actions draws from
 * one PRNG stream of its own, and each push's fate (dropped, duplicated, delayed and by how much)
 * is drawn from a stream keyed by the seed, the device and the frame itself, so it does not depend
 * on the order in which frames reach the devices (real sockets, real timers). Which frames exist
 * can still vary with timing (a head push coalesced, a version frame); the choices made for a
 * given frame and the actions taken do not.
 */
describe('random faults', () => {
  const seed = Number(process.env.REDPOINT_SDK_SEED ?? 20261130);

  it(`every device converges to the server after lost, duplicated and reordered pushes (seed ${seed})`, async () => {
    console.log(`sdk random faults: seed ${seed} (REDPOINT_SDK_SEED=${seed} replays this run)`);
    const rnd = mulberry32(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const users = ['rf-ann', 'rf-ben'];
    const convs: Record<string, string[]> = {
      'rf-dm': ['rf-ann', 'rf-ben'],
      'rf-ann-cy': ['rf-ann', 'rf-cy'],
      'rf-team': ['rf-ann', 'rf-ben', 'rf-cy'],
      'rf-big': ['rf-ann', 'rf-ben', 'rf-cy', 'rf-dee'],
    };
    for (const [conv, members] of Object.entries(convs)) await h.members(conv, { add: members, category: conv === 'rf-dm' ? 'private' : 'group' });
    const seqs = new Map<string, number>();

    // Each push is dropped (10%), duplicated (10%) or delayed up to 40 ms (15%, which reorders).
    const faulty = (device: string) => {
      // A frame seen again on this device (a duplicate the server sent) gets its own fate too.
      const seen = new Map<string, number>();
      return newTap((frame: ServerFrame, deliver) => {
        if (frame.t !== 'change' && frame.t !== 'head') return deliver();
        const text = JSON.stringify(frame);
        const nth = (seen.get(text) ?? 0) + 1;
        seen.set(text, nth);
        const fate = keyedRandom(seed, `${device}|${nth}|${text}`);
        const r = fate();
        if (r < 0.1 && frame.t === 'change') return;
        if (r < 0.2) {
          deliver();
          deliver();
          return;
        }
        if (r < 0.35) {
          setTimeout(() => deliver(), Math.floor(fate() * 40));
          return;
        }
        deliver();
      });
    };
    const devices = users.flatMap((uid) =>
      ['1', '2'].map((d) => ({
        uid,
        // The suite's client: stopped after the test, also when it fails halfway.
        client: client(uid, { WebSocket: tapped(faulty(`${uid}/${d}`)), device: d, readBatchMs: 30, gapWaitMs: 50 }),
      })),
    );
    await Promise.all(devices.map((d) => d.client.start()));

    // What the script did, step by step: the same seed must give the same list (printed as a digest).
    const script: string[] = [];
    for (let step = 0; step < 150; step++) {
      const r = rnd();
      const conv = pick(Object.keys(convs));
      script.push(`${step}:${r.toFixed(6)}:${conv}`);
      const members = convs[conv] ?? [];
      if (r < 0.5) {
        const seq = (seqs.get(conv) ?? 0) + 1 + (rnd() < 0.1 ? 1 : 0);
        seqs.set(conv, seq);
        const sender = pick(members);
        const mentions = rnd() < 0.2 ? [pick(members)] : undefined;
        await h.post({ conv, seq, sender, mentions });
      } else {
        const device = pick(devices);
        if (!members.includes(device.uid)) continue;
        const head = seqs.get(conv) ?? 0;
        if (r < 0.75) device.client.markRead(conv, Math.floor(rnd() * (head + 1)));
        else if (r < 0.8) {
          // "Unread from here" from one device while the others read: readSeq goes down in their pushes too.
          if (head > 0) void device.client.markUnreadFrom(conv, 1 + Math.floor(rnd() * head));
        } else if (r < 0.86) void device.client.mute(conv, rnd() < 0.5);
        else if (r < 0.92) void device.client.markUnread(conv, rnd() < 0.5);
        else if (r < 0.95) void device.client.deleteConversation(conv);
        else await h.ok('POST', `/v1/users/${device.uid}/read`, { conv, seq: seqs.get(conv) ?? 0 });
      }
      if (rnd() < 0.2) await new Promise((resolve) => setTimeout(resolve, Math.floor(rnd() * 20)));
    }

    const digest = keyedRandom(seed, script.join(' '))().toFixed(12);
    console.log(`sdk random faults: seed ${seed}, script digest ${digest} (${script.length} steps)`);
    for (const d of devices) {
      await convergedTo(h, d.client, d.uid, 10_000).catch((err: unknown) => {
        throw new Error(`seed ${seed} (replay with REDPOINT_SDK_SEED=${seed}): ${err instanceof Error ? err.message : String(err)}`);
      });
    }
    for (const d of devices) {
      const { total } = await h.unread(d.uid);
      expect(d.client.state.totals?.total).toBe(total);
    }
  });
});
