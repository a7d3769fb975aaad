/**
 * `npm run token -- <uid> [ttlSeconds]`: prints a client JWT signed with REDPOINT_JWT_SECRET, or
 * with the published dev secret when the server runs in dev mode (and then says so on stderr:
 * such a token proves nothing to anyone). Issuer and audience follow REDPOINT_JWT_ISSUER and
 * REDPOINT_JWT_AUDIENCE; a TTL above REDPOINT_JWT_MAX_TTL_SECONDS is refused, as the server would.
 */
import { type Config, ConfigError, DEV_JWT_SECRET, loadConfig } from '../config.js';
import { Authenticator } from './tokens.js';

const DEFAULT_TTL_SECONDS = 24 * 3600;

function fail(message: string): never {
  console.error(`redpoint: ${message}`);
  process.exit(2);
}

const [uid, ttlArg] = process.argv.slice(2);
if (!uid || !/^[A-Za-z0-9_.:@-]{1,128}$/.test(uid)) fail('usage: npm run token -- <uid> [ttlSeconds]');
const ttl = ttlArg === undefined ? DEFAULT_TTL_SECONDS : Number(ttlArg);
if (!Number.isSafeInteger(ttl) || ttl < 1) fail(`ttlSeconds must be a positive integer (got ${JSON.stringify(ttlArg)})`);

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) fail(err.message);
  throw err;
}
if (config.jwtSecret === undefined) {
  fail('REDPOINT_JWT_SECRET is not set: with REDPOINT_JWKS_URL / REDPOINT_JWKS_FILE only, your identity provider issues the tokens');
}
const auth = Authenticator.fromConfig(config);
if (ttl > auth.maxTtlSeconds) fail(`ttlSeconds ${ttl} exceeds REDPOINT_JWT_MAX_TTL_SECONDS (${auth.maxTtlSeconds}): the server would refuse the token`);
if (config.jwtSecret === DEV_JWT_SECRET) {
  console.error(
    'redpoint: WARNING: signed with the published dev secret (dev mode: no credentials set). Only a dev-mode server accepts it; anyone can mint the same.',
  );
}
process.stdout.write(`${await auth.mintUserToken(uid, ttl)}\n`);
