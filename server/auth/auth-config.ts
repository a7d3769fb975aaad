import { readFileSync } from 'node:fs';
import { checkDistinct, DEFAULT_KEY_NAME, type NamedApiKey, parseApiKeys } from './api-keys.js';
import { checkJwks, type JwksSource } from './jwks.js';

/** Dev-mode credentials: published on purpose, accepted only on 127.0.0.1. */
export const DEV_API_KEY = 'dev-api-key';
export const DEV_JWT_SECRET = 'redpoint-dev-secret-do-not-use-in-production';

/** The credential variables as the environment gives them (already checked for type and length). */
export interface CredentialEnv {
  REDPOINT_API_KEY?: string | undefined;
  REDPOINT_API_KEYS?: string | undefined;
  REDPOINT_JWT_SECRET?: string | undefined;
  REDPOINT_JWKS_URL?: string | undefined;
  REDPOINT_JWKS_FILE?: string | undefined;
}

export interface Credentials {
  /** No credential variable set at all: the published dev credentials, loopback only. */
  devMode: boolean;
  apiKey?: string;
  apiKeys?: NamedApiKey[];
  jwtSecret?: string;
  jwks?: JwksSource;
}

/** The variables whose presence means "production"; with none of them the server runs in dev mode. */
const CREDENTIAL_VARIABLES = ['REDPOINT_API_KEY', 'REDPOINT_API_KEYS', 'REDPOINT_JWT_SECRET', 'REDPOINT_JWKS_URL', 'REDPOINT_JWKS_FILE'] as const;

/**
 * Decides dev mode vs production and checks that the credentials make sense together. Pushes one
 * line per problem onto `problems` (never a key or secret), and returns what it could resolve.
 */
export function resolveCredentials(env: CredentialEnv, problems: string[]): Credentials {
  const set = CREDENTIAL_VARIABLES.filter((name) => env[name] !== undefined);
  if (set.length === 0) return { devMode: true, apiKey: DEV_API_KEY, jwtSecret: DEV_JWT_SECRET };

  const out: Credentials = { devMode: false };
  if (env.REDPOINT_API_KEY !== undefined) out.apiKey = env.REDPOINT_API_KEY;
  if (env.REDPOINT_API_KEYS !== undefined) {
    try {
      out.apiKeys = parseApiKeys(env.REDPOINT_API_KEYS);
      checkDistinct([...(out.apiKey !== undefined ? [{ name: DEFAULT_KEY_NAME, key: out.apiKey }] : []), ...out.apiKeys]);
    } catch (err) {
      problems.push(`REDPOINT_API_KEYS: ${(err as Error).message}`);
    }
  }
  if (env.REDPOINT_JWT_SECRET !== undefined) {
    if (env.REDPOINT_JWT_SECRET === DEV_JWT_SECRET) problems.push('REDPOINT_JWT_SECRET: is the published dev secret; generate one (openssl rand -hex 32)');
    out.jwtSecret = env.REDPOINT_JWT_SECRET;
  }
  if (env.REDPOINT_JWKS_URL !== undefined && env.REDPOINT_JWKS_FILE !== undefined) {
    problems.push('REDPOINT_JWKS_URL and REDPOINT_JWKS_FILE: set one of them, not both');
  } else if (env.REDPOINT_JWKS_URL !== undefined) {
    const problem = jwksUrlProblem(env.REDPOINT_JWKS_URL);
    if (problem) problems.push(`REDPOINT_JWKS_URL: ${problem}`);
    else out.jwks = { url: env.REDPOINT_JWKS_URL };
  } else if (env.REDPOINT_JWKS_FILE !== undefined) {
    try {
      checkJwks(JSON.parse(readFileSync(env.REDPOINT_JWKS_FILE, 'utf8')));
      out.jwks = { file: env.REDPOINT_JWKS_FILE };
    } catch (err) {
      problems.push(`REDPOINT_JWKS_FILE: ${(err as Error).message}`);
    }
  }

  const hasApiKey = env.REDPOINT_API_KEY !== undefined || env.REDPOINT_API_KEYS !== undefined;
  const hasTokenKeys = env.REDPOINT_JWT_SECRET !== undefined || env.REDPOINT_JWKS_URL !== undefined || env.REDPOINT_JWKS_FILE !== undefined;
  if (!hasApiKey || !hasTokenKeys) {
    problems.push(
      `${set.join(', ')} set, so this is production, which needs ${hasApiKey ? '' : 'an API key (REDPOINT_API_KEY or REDPOINT_API_KEYS)'}${!hasApiKey && !hasTokenKeys ? ' and ' : ''}${hasTokenKeys ? '' : 'a way to verify user tokens (REDPOINT_JWT_SECRET, REDPOINT_JWKS_URL or REDPOINT_JWKS_FILE)'}; set none of them for dev mode`,
    );
  }
  return out;
}

/** https, or plain http to this machine only: keys fetched over the network must not be forgeable in transit. */
function jwksUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not a URL';
  }
  if (url.protocol === 'https:') return undefined;
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname) || /^127\.\d+\.\d+\.\d+$/.test(url.hostname);
  if (url.protocol === 'http:' && loopback) return undefined;
  return 'must be https:// (plain http only to localhost)';
}
