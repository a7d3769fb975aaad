// What a JSON-only browser app bundles: the client, its own WebSocket, JSON frames.
import { RedpointClient } from '@redpoint/client';

export const connect = (url: string, token: () => Promise<string>): RedpointClient => new RedpointClient({ url, token });
