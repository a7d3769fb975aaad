// JSON frames, and one socket shared by the tabs of the browser.
import { RedpointClient } from '@redpoint/client';
import { shareTabs } from '@redpoint/client/tabs';

export const connect = (url: string, token: () => Promise<string>, uid: string): RedpointClient =>
  new RedpointClient({ url, token, transport: shareTabs({ key: `user:${uid}` }) });
