/**
 * `npm run token -- <uid> [ttlSeconds]`: prints a client JWT signed with REDPOINT_JWT_SECRET, or
 * with the published dev secret when the server runs in dev mode.
 */
import { ConfigError, loadConfig, type Config } from '../config.js';
import { Authenticator } from './tokens.js';

const [uid, ttl] = process.argv.slice(2);
if (!uid || !/^[A-Za-z0-9_.:@-]{1,128}$/.test(uid)) {
  console.error('usage: npm run token -- <uid> [ttlSeconds]');
  process.exit(2);
}
let config: Config;
try {
  config = loadConfig();
} catch (err) {
  console.error(err instanceof ConfigError ? `redpoint: ${err.message}` : err);
  process.exit(2);
}
const auth = new Authenticator(config.jwtSecret, config.apiKey);
process.stdout.write(`${await auth.mintUserToken(uid, ttl ? Number(ttl) : 24 * 3600)}\n`);
