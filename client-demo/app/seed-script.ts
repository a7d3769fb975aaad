/**
 * What "Seed demo conversations" sends: a handful of chats with believable texts, spaced out in
 * time (the newest a minute ago, the oldest days ago) so the list reads like a messenger's.
 * `cast` maps a name to someone other than the page's user (on bob's page, "bob" is alice).
 */

interface SeedLine {
  from: string;
  text: string;
  mention?: boolean;
}

/** A topic of a seeded chat (PROTOCOL.md "Topics"): its own messages, seqs and count. */
interface SeedTopic {
  topic: string;
  /** Minutes before now that its last message was sent. */
  lastAgoMin: number;
  lines: SeedLine[];
}

export interface SeedChat {
  conv: string;
  members: string[];
  category: 'private' | 'group' | 'system';
  /** Minutes before now that its last message was sent; earlier ones go 3 minutes apart. */
  lastAgoMin: number;
  lines: SeedLine[];
  muted?: boolean;
  /** Topics: the conversation is then listed with them under it and their counts summed. */
  topics?: SeedTopic[];
  /**
   * A thread on one of `lines` (its 1-based position; the thread hangs off the seq that line gets), PROTOCOL.md "Threads": its
   * replies count in the thread's row only, for those who follow it (a reply mentioning the
   * page's user makes them follow).
   */
  thread?: { root: number; lastAgoMin: number; lines: SeedLine[] };
}

export function seedChats(uid: string, cast: (name: string) => string): SeedChat[] {
  const friend = cast('bob');
  // A private chat is named by both members (sorted), and each side shows the other's name.
  const dm = `dm:${[uid, friend].sort().join(':')}`;
  const [carol, dave, erin] = [cast('carol'), cast('dave'), cast('erin')];
  return [
    {
      conv: dm,
      members: [uid, friend],
      category: 'private',
      lastAgoMin: 1,
      lines: [
        { from: friend, text: 'Are we still on for lunch?' },
        { from: friend, text: 'I booked the usual place for 12:30' },
      ],
    },
    {
      conv: 'design-team',
      members: [uid, friend, carol, dave],
      category: 'group',
      lastAgoMin: 14,
      lines: [
        { from: carol, text: 'New mockups for onboarding are up' },
        { from: carol, text: 'The empty states still need a pass' },
        { from: carol, text: 'Dark mode tokens are in the library now' },
        { from: carol, text: 'I moved the review to Thursday' },
        { from: carol, text: 'Thoughts on the new icon set?' },
        { from: dave, text: 'can you sign off the icons before Thursday?', mention: true },
      ],
    },
    {
      conv: 'product-launch',
      members: [uid, friend, carol, erin],
      category: 'group',
      lastAgoMin: 60,
      lines: [
        { from: erin, text: 'Launch is on the 14th, topics for each track below' },
        { from: friend, text: 'Press kit draft is in the shared folder' },
      ],
      topics: [
        {
          topic: 'design',
          lastAgoMin: 30,
          lines: [
            { from: carol, text: 'Landing page hero v3 is up' },
            { from: carol, text: 'Going with the dark variant unless someone objects' },
            { from: carol, text: 'can you check the copy on the pricing block?', mention: true },
          ],
        },
        {
          topic: 'marketing',
          lastAgoMin: 45,
          lines: [
            { from: erin, text: 'Newsletter goes out the morning of the launch' },
            { from: erin, text: 'Need two customer quotes by Friday' },
          ],
        },
      ],
    },
    {
      conv: 'release-train',
      members: [uid, carol, erin],
      category: 'group',
      lastAgoMin: 95,
      lines: [
        { from: erin, text: 'The 2.4 branch is cut' },
        { from: erin, text: 'Staging deploy is green' },
        { from: erin, text: 'Release notes are ready for review' },
      ],
    },
    {
      conv: 'announcements',
      members: [uid, 'redpoint-bot', erin],
      category: 'system',
      lastAgoMin: 26 * 60,
      lines: [{ from: 'redpoint-bot', text: 'Scheduled maintenance on Saturday, 02:00–03:00 UTC' }],
      thread: {
        root: 1,
        lastAgoMin: 20,
        lines: [
          { from: erin, text: 'Does this include the EU region?' },
          { from: 'redpoint-bot', text: 'it does; reply here if your team needs the window moved', mention: true },
          { from: erin, text: 'Thanks, Saturday works for us' },
        ],
      },
    },
    {
      conv: 'random',
      members: [uid, dave, erin],
      category: 'group',
      lastAgoMin: 3 * 24 * 60,
      muted: true,
      lines: Array.from({ length: 12 }, (_, i) => ({ from: dave, text: RANDOM[i % RANDOM.length] ?? '' })),
    },
  ];
}

const RANDOM = ['Anyone up for coffee?', 'That build took forever', 'Look at this cat', 'Friday demo at 4?', 'Who took my charger', 'New keyboard day'];

/** The Send form's text when left empty. */
export const SAMPLE_TEXTS = ['Hey, got a minute?', 'Pushed a fix, can you check?', 'Sounds good', 'See you at the standup', 'Merged!'];
