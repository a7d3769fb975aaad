import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, loadConfig } from '../../server/config.js';
import { startRedisServer } from '../helpers/redis-server.js';

/**
 * deploy/docker-compose.yml cannot run here (no Docker engine): what can be checked without one
 * is checked. The YAML parses; the Redpoint services build this repository's Dockerfile, set
 * only variables the server reads, and those make a valid production configuration on the
 * compose Redis; the Redis command line gives AOF everysec and noeviction on a real
 * redis-server; Prometheus scrapes exactly the Redpoint services on their container port.
 */

const ROOT = join(import.meta.dirname, '../..');
const DEPLOY = join(ROOT, 'deploy');

interface Service {
  build?: { context: string; dockerfile: string };
  image?: string;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  profiles?: string[];
  volumes?: string[];
}

async function compose(): Promise<{ services: Record<string, Service>; volumes?: Record<string, unknown> }> {
  return parse(await readFile(join(DEPLOY, 'docker-compose.yml'), 'utf8'), { merge: true });
}

/** Compose's `${NAME:?message}` and `${NAME:-default}`, with `given` standing for the operator's environment. */
function interpolate(value: string, given: Record<string, string>): string {
  return value.replace(/\$\{([A-Z_]+)(?::([?-])([^}]*))?\}/g, (_all, name: string, kind?: string, rest?: string) => {
    if (given[name] !== undefined) return given[name];
    if (kind === '-') return rest ?? '';
    throw new Error(`${name} is required: ${rest}`);
  });
}

const redpointServices = (services: Record<string, Service>) => Object.entries(services).filter(([name]) => name.startsWith('redpoint-'));

describe('deploy/docker-compose.yml', () => {
  it('two Redpoint instances built from this repository, on one Redis, with the same settings', async () => {
    const { services } = await compose();
    const instances = redpointServices(services);
    expect(instances.map(([name]) => name)).toEqual(['redpoint-1', 'redpoint-2']);
    for (const [name, service] of instances) {
      expect(service.build, name).toEqual({ context: '..', dockerfile: 'Dockerfile' });
      await expect(readFile(join(DEPLOY, service.build?.context ?? '', service.build?.dockerfile ?? ''), 'utf8')).resolves.toMatch(/EXPOSE 8080/);
      expect(service.environment?.REDIS_URL, name).toBe('redis://redis:6379');
      expect(service.environment).toEqual(instances[0]?.[1].environment);
    }
    expect(services.redis?.volumes).toEqual(['redis-data:/data']);
  });

  it('sets only variables the server reads, and they make a production configuration (never dev mode)', async () => {
    const { services } = await compose();
    const secrets = { REDPOINT_API_KEY: 'k'.repeat(48), REDPOINT_JWT_SECRET: 's'.repeat(64) };
    for (const [name, service] of redpointServices(services)) {
      const env = Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, interpolate(v, secrets)]));
      expect(
        Object.keys(env).filter((k) => !CONFIG_VARIABLES.includes(k)),
        name,
      ).toEqual([]);
      const config = loadConfig(env);
      expect(config).toMatchObject({ devMode: false, redisUrl: 'redis://redis:6379', host: '0.0.0.0', port: 8080, logLevel: 'info' });
      // Without the secrets compose refuses to start, instead of a dev-mode server bound to the container's loopback.
      expect(() => interpolate(service.environment?.REDPOINT_API_KEY ?? '', {})).toThrow(/REDPOINT_API_KEY is required/);
      expect(() => interpolate(service.environment?.REDPOINT_JWT_SECRET ?? '', {})).toThrow(/REDPOINT_JWT_SECRET is required/);
      for (const mapping of service.ports ?? []) expect(mapping.split(':').at(-1), name).toBe(String(config.port));
    }
  });

  it('Redis runs with AOF everysec and noeviction (the command line, applied to a real redis-server)', async () => {
    const { services } = await compose();
    const command = services.redis?.command ?? [];
    expect(services.redis?.image).toMatch(/^redis:7/);
    expect(command[0]).toBe('redis-server');
    const lines: string[] = [];
    for (let i = 1; i < command.length; i += 2) {
      expect(command[i], 'options come as --name value pairs').toMatch(/^--[a-z-]+$/);
      lines.push(`${command[i]?.slice(2)} ${command[i + 1]}`);
    }
    const redis = await startRedisServer({ extraConfig: lines });
    const client = new Redis(redis.url);
    try {
      const get = async (name: string) => ((await client.config('GET', name)) as string[])[1];
      expect({ appendonly: await get('appendonly'), appendfsync: await get('appendfsync'), policy: await get('maxmemory-policy') }).toEqual({
        appendonly: 'yes',
        appendfsync: 'everysec',
        policy: 'noeviction',
      });
    } finally {
      await client.quit();
      await redis.stop();
    }
  });

  it('Prometheus (profile monitoring) scrapes exactly the Redpoint services; every mounted file exists', async () => {
    const { services } = await compose();
    expect(services.prometheus?.profiles).toEqual(['monitoring']);
    expect(services.grafana?.profiles).toEqual(['monitoring']);
    const prometheus = parse(await readFile(join(DEPLOY, 'prometheus/prometheus.yml'), 'utf8')) as {
      rule_files: string[];
      scrape_configs: Array<{ job_name: string; metrics_path: string; static_configs: Array<{ targets: string[] }> }>;
    };
    const job = prometheus.scrape_configs.find((c) => c.job_name === 'redpoint');
    expect(job?.metrics_path).toBe('/metrics');
    expect(job?.static_configs.flatMap((c) => c.targets)).toEqual(redpointServices(services).map(([name]) => `${name}:8080`));
    // Every file a service mounts from deploy/ is there.
    for (const [name, service] of Object.entries(services)) {
      for (const volume of service.volumes ?? []) {
        const source = volume.split(':')[0] ?? '';
        if (!source.startsWith('./')) continue;
        await expect(stat(join(DEPLOY, source)), `${name}: ${source}`).resolves.toBeDefined();
      }
    }
    expect(services.prometheus?.volumes).toContain('./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro');
    expect(prometheus.rule_files).toEqual(['alerts.yml']);
  });

  it('the durable override (docker-compose.durable.yml) adds PostgreSQL and gives both instances DATABASE_URL', async () => {
    const base = await compose();
    const durable = parse(await readFile(join(DEPLOY, 'docker-compose.durable.yml'), 'utf8'), { merge: true }) as {
      services: Record<string, Service & { depends_on?: Record<string, { condition: string }>; healthcheck?: { test: string[] } }>;
      volumes?: Record<string, unknown>;
    };
    expect(durable.services.postgres?.image).toMatch(/^postgres:1[5-9]/);
    expect(durable.services.postgres?.volumes).toEqual(['postgres-data:/var/lib/postgresql/data']);
    expect(Object.keys(durable.volumes ?? {})).toEqual(['postgres-data']);
    expect(durable.services.postgres?.healthcheck?.test).toContain('pg_isready');
    const secrets = { REDPOINT_API_KEY: 'k'.repeat(48), REDPOINT_JWT_SECRET: 's'.repeat(64), POSTGRES_PASSWORD: 'p'.repeat(48) };
    const pgEnv = durable.services.postgres?.environment ?? {};
    for (const [name] of redpointServices(base.services)) {
      const override = durable.services[name];
      expect(override?.depends_on, name).toEqual({ redis: { condition: 'service_healthy' }, postgres: { condition: 'service_healthy' } });
      // Compose merges environment maps: the base's variables plus DATABASE_URL.
      const merged = { ...base.services[name]?.environment, ...override?.environment };
      const env = Object.fromEntries(Object.entries(merged).map(([k, v]) => [k, interpolate(v, secrets)]));
      expect(
        Object.keys(env).filter((k) => !CONFIG_VARIABLES.includes(k)),
        name,
      ).toEqual([]);
      const config = loadConfig(env);
      const url = new URL(config.durable?.databaseUrl ?? '');
      expect({ user: url.username, host: url.hostname, port: url.port, db: url.pathname, password: url.password }).toEqual({
        user: interpolate(pgEnv.POSTGRES_USER ?? '', secrets),
        host: 'postgres',
        port: '5432',
        db: `/${interpolate(pgEnv.POSTGRES_DB ?? '', secrets)}`,
        password: secrets.POSTGRES_PASSWORD,
      });
      expect(() => interpolate(override?.environment?.DATABASE_URL ?? '', {})).toThrow(/POSTGRES_PASSWORD is required/);
    }
  });
});
