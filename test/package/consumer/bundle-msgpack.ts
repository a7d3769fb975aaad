// The same with MessagePack frames.
import { RedpointClient } from '@redpoint/client';
import { msgpack } from '@redpoint/client/msgpack';

export const connect = (url: string, token: () => Promise<string>): RedpointClient => new RedpointClient({ url, token, codec: msgpack });
