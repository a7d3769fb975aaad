import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

/**
 * Real signing keys made in the test (ES256 and RS256, each with a `kid`), tokens signed with
 * them, and a JWKS endpoint on 127.0.0.1 whose key set the test changes as it rotates keys.
 */

export interface TestKey {
  kid: string;
  alg: 'ES256' | 'RS256';
  /** The public JWK, as an identity provider publishes it. */
  publicJwk: JWK;
  privateKey: PrivateKey;
  /** A token for `sub` (1 h unless the claims say otherwise). */
  sign(sub: string, claims?: JWTPayload, header?: { kid?: string | undefined }): Promise<string>;
}

export async function makeKey(alg: 'ES256' | 'RS256', kid: string): Promise<TestKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return {
    kid,
    alg,
    publicJwk,
    privateKey,
    sign: (sub, claims = {}, header = { kid }) => {
      const jwt = new SignJWT(claims)
        .setProtectedHeader({ alg, ...(header.kid !== undefined ? { kid: header.kid } : {}) })
        .setSubject(sub)
        .setIssuedAt();
      if (claims.exp === undefined) jwt.setExpirationTime('1h');
      return jwt.sign(privateKey);
    },
  };
}

export function jwksOf(...keys: TestKey[]): { keys: JWK[] } {
  return { keys: keys.map((k) => k.publicJwk) };
}

export interface JwksServer {
  url: string;
  /** What the endpoint serves from now on; `null`: it answers 503 (the identity provider is down). */
  serve(jwks: object | null): void;
  /** Requests served so far. */
  readonly fetches: number;
  stop(): Promise<void>;
}

export async function startJwksServer(initial: object): Promise<JwksServer> {
  let current: object | null = initial;
  let fetches = 0;
  const server: Server = createServer((_req, res) => {
    fetches++;
    if (current === null) {
      res.writeHead(503).end('down');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end(JSON.stringify(current));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/.well-known/jwks.json`,
    serve: (jwks) => {
      current = jwks;
    },
    get fetches() {
      return fetches;
    },
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
