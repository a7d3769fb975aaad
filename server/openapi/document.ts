import type { TObject, TSchema } from '@sinclair/typebox';
import { ConvLine, HeadBody, HeadsBody, HeadsQueryBody, ImportBody, ReconcileBody, UserLine } from '../../protocol/admin-schemas.js';
import { ERROR_CODES, type ErrorCode } from '../../protocol/errors.js';
import { ENDPOINTS, type Endpoint, errorCodesOf, pathParameters, type Reply } from '../../protocol/http-api.js';
import { LIMITS } from '../../protocol/limits.js';
import { ErrorBodySchema, errorCodeSchema } from '../../protocol/replies.js';
import { ConvRef, DevTokenBody, Id, MembersBody, Message, MessageBatch, ReadBody, SettingsBody } from '../../protocol/schemas.js';

/**
 * The OpenAPI 3.1 document of the HTTP API, built from the endpoint table (`protocol/http-api.ts`)
 * and the TypeBox schemas of requests and replies: never written by hand. `npm run openapi`
 * writes it to `protocol/openapi.json`; the server serves the same object at `/openapi.json`.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** Request schemas worth a name in `components.schemas` (replies are named by their `$id`). */
const NAMED_REQUESTS = new Map<TSchema, string>([
  [Message, 'Message'],
  [MessageBatch, 'MessageBatch'],
  [MembersBody, 'MembersBody'],
  [ReadBody, 'ReadBody'],
  [SettingsBody, 'SettingsBody'],
  [DevTokenBody, 'DevTokenBody'],
  [HeadBody, 'HeadBody'],
  [HeadsBody, 'HeadsBody'],
  [ReconcileBody, 'ReconcileBody'],
  [HeadsQueryBody, 'HeadsQueryBody'],
  [ImportBody, 'ImportBody'],
  [ConvLine, 'ConvLine'],
  [UserLine, 'UserLine'],
]);

const BODY_MEDIA_TYPES = ['application/json', 'application/msgpack'] as const;

const DESCRIPTION = `The HTTP API of Redpoint, the sync server for IM unread counts and red dots. Generated from the
schemas in \`protocol/\` (\`npm run openapi\`); \`protocol/PROTOCOL.md\` explains the semantics, and
specifies the WebSocket \`/v1/ws\`, which this document does not describe.

- **Credentials** go in \`Authorization: Bearer <credential>\`: the message service's API key, or a
  user's JWT. Credentials are checked before the body is parsed.
- **Errors** all have the body \`{"error": {"code", "message"}}\`; branch on \`code\`. An unknown path
  answers \`404 not_found\`, a known path with another method \`405 method_not_allowed\`. During
  graceful shutdown every request answers \`503 unavailable\`. Every 503 carries \`Retry-After\`:
  \`unavailable\` means nothing was applied, \`outcome_unknown\` (writes) that the change may have
  been applied; retry either (every write is idempotent).
- **Content negotiation**: replies are JSON, or MessagePack when \`Accept\` contains
  \`application/msgpack\` (errors too); request bodies are JSON (also without a \`Content-Type\`) or
  MessagePack. Bodies over ${LIMITS.maxBodyBytes} bytes answer \`413\`.
- Every reply carries \`x-request-id\`: the request's \`X-Request-Id\`, or one the server made.
- Browsers on other origins: see \`CORS_ORIGINS\` in docs/configuration.md (off by default).`;

/**
 * The document for a server in production (the committed `protocol/openapi.json`), or with
 * `devMode` for one in dev mode: only then does it list the dev-mode endpoints, which a
 * production server answers 404.
 */
export function buildOpenApiDocument(options: { devMode?: boolean } = {}): JsonObject {
  const devMode = options.devMode === true;
  const components = new Components();
  // Referenced by every error response (through an allOf), so registered up front.
  components.schema(ErrorBodySchema);
  const paths: JsonObject = {};
  for (const endpoint of ENDPOINTS) {
    if (endpoint.devModeOnly && !devMode) continue;
    const path = endpoint.path.replace(/:([A-Za-z]+)/g, '{$1}');
    const item = (paths[path] ??= {}) as JsonObject;
    item[endpoint.method] = operation(endpoint, components);
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Redpoint HTTP API', version: '1', license: { name: 'MIT', identifier: 'MIT' }, description: DESCRIPTION },
    // Where a deployment answers is the operator's to say: a variable whose default is the address
    // `npm start` serves on, so a client generator or "try it out" works against a dev server.
    servers: [
      {
        url: '{origin}',
        description: "A Redpoint server: `origin` is the scheme, host and PORT your clients reach it at (the default is the dev server's).",
        variables: { origin: { default: 'http://127.0.0.1:8080' } },
      },
    ],
    tags: [
      { name: 'message service', description: 'Called by your message service with an API key.' },
      { name: 'client', description: "Called by apps with the user's JWT, or by your servers with an API key for any user." },
      {
        name: 'operator',
        description:
          'API key only: re-asserting heads, deleting a conversation for all, erasing a user, and what the `redpoint` CLI needs against a server (`/v1/admin/...`).',
      },
      { name: 'operations', description: 'Unauthenticated: bind or route them privately.' },
      ...(devMode ? [{ name: 'dev mode', description: 'Served only in dev mode (no credentials configured; loopback only).' }] : []),
    ],
    paths,
    components: {
      schemas: components.schemas,
      responses: components.responses,
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key of the message service (REDPOINT_API_KEY or one of REDPOINT_API_KEYS). On per-user endpoints it acts for any user.',
        },
        userToken: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            "A user's JWT: `sub` = user id, `exp` required, lifetime at most REDPOINT_JWT_MAX_TTL_SECONDS. HS256 (REDPOINT_JWT_SECRET) or ES256/RS256 (a key of REDPOINT_JWKS_URL / REDPOINT_JWKS_FILE, picked by `kid`).",
        },
      },
      parameters: {
        RequestId: {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          description: "Echoed in the reply's `x-request-id`; the server makes one up without it.",
          schema: { type: 'string' },
        },
      },
      headers: {
        RequestId: { description: "The request's X-Request-Id, or one made by the server.", required: true, schema: { type: 'string', minLength: 1 } },
        RetryAfter: { description: 'Seconds to wait before retrying; on every 503 and 429.', required: true, schema: { type: 'string', pattern: '^[0-9]+$' } },
      },
    },
  };
}

/** A user's operations on one of their rows: `:conv` may name a topic (api-routes.ts convParam). */
const TOPIC_PATHS = new Set([
  '/v1/users/:uid/conversations/:conv',
  '/v1/users/:uid/conversations/:conv/unread-from',
  '/v1/users/:uid/conversations/:conv/reads',
]);

function operation(endpoint: Endpoint, components: Components): JsonObject {
  const topics = TOPIC_PATHS.has(endpoint.path);
  const parameters: Json[] = pathParameters(endpoint.path).map((name) => ({
    name,
    in: 'path',
    required: true,
    description:
      name === 'uid'
        ? 'User id (percent-encoded if needed).'
        : name === 'root'
          ? 'The seq of the thread\'s root message in the conversation (PROTOCOL.md "Threads").'
          : topics
            ? 'Conversation id, a topic\'s `<conv>#t:<topic>` or a thread\'s `<conv>#r:<root>` (`#` sent as `%23`; PROTOCOL.md "Topics", "Threads").'
            : 'Conversation id (percent-encoded if needed).',
    schema: name === 'root' ? { type: 'integer', minimum: 1, maximum: LIMITS.maxSeq } : components.schema(name === 'conv' && topics ? ConvRef : Id),
  }));
  if (endpoint.query) parameters.push(...queryParameters(endpoint.query, components));
  parameters.push({ $ref: '#/components/parameters/RequestId' });
  const op: JsonObject = {
    operationId: endpoint.operationId,
    tags: [endpoint.tag],
    summary: endpoint.summary,
    ...(endpoint.description ? { description: endpoint.description } : {}),
    security: endpoint.auth.map((credential) => ({ [credential]: [] })),
    parameters,
  };
  if (endpoint.body) {
    const schema = components.schema(endpoint.body);
    op.requestBody = { required: true, content: Object.fromEntries(BODY_MEDIA_TYPES.map((type) => [type, { schema }])) };
  }
  op.responses = responses(endpoint, components);
  if (endpoint.devModeOnly) op['x-redpoint-dev-mode-only'] = true;
  return op;
}

function queryParameters(query: TObject, components: Components): Json[] {
  const required = new Set(query.required ?? []);
  return Object.entries(query.properties).map(([name, schema]) => {
    const { description, ...rest } = schema;
    return {
      name,
      in: 'query',
      required: required.has(name),
      ...(typeof description === 'string' ? { description } : {}),
      schema: components.schema(rest as TSchema),
    };
  });
}

/**
 * Success replies, then one response per error status naming exactly the codes this endpoint
 * may answer with it. Error responses are shared components, named by their codes.
 */
function responses(endpoint: Endpoint, components: Components): JsonObject {
  const out: JsonObject = {};
  const replies = new Map<number, Reply[]>();
  for (const reply of endpoint.replies) replies.set(reply.status, [...(replies.get(reply.status) ?? []), reply]);
  const errors = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(endpoint)) {
    const status = ERROR_CODES[code].status;
    errors.set(status, [...(errors.get(status) ?? []), code]);
  }
  for (const status of [...new Set([...replies.keys(), ...errors.keys()])].sort((a, b) => a - b)) {
    const codes = errors.get(status);
    const own = replies.get(status);
    if (!own && codes) {
      out[String(status)] = { $ref: `#/components/responses/${components.errorResponse(codes)}` };
      continue;
    }
    const descriptions = (own ?? []).map((r) => r.description);
    const content = new Map<string, Json[]>();
    const add = (type: string, schema: Json) => content.set(type, [...(content.get(type) ?? []), schema]);
    for (const reply of own ?? []) {
      if ('schema' in reply) for (const type of BODY_MEDIA_TYPES) add(type, components.schema(reply.schema));
      else add(reply.mediaType, { type: 'string' });
    }
    if (codes) {
      descriptions.push(errorDescription(codes));
      for (const type of BODY_MEDIA_TYPES) add(type, components.errorSchema(codes));
    }
    out[String(status)] = response(descriptions.join(' '), content, status);
  }
  return out;
}

function response(description: string, content: ReadonlyMap<string, Json[]>, status: number): JsonObject {
  const media: JsonObject = {};
  for (const [type, schemas] of content) media[type] = { schema: schemas.length === 1 ? (schemas[0] ?? null) : { anyOf: schemas } };
  const headers: JsonObject = { 'x-request-id': { $ref: '#/components/headers/RequestId' } };
  if (status === 503 || status === 429) headers['retry-after'] = { $ref: '#/components/headers/RetryAfter' };
  return { description, headers, content: media };
}

function errorDescription(codes: readonly ErrorCode[]): string {
  return codes.map((code) => `\`${code}\`: ${ERROR_CODES[code].reason}`).join(' ');
}

/**
 * Turns TypeBox schemas into plain JSON Schema (symbols dropped), moving every schema with an
 * `$id`, and every named request schema, into `components.schemas` behind a `$ref`.
 */
class Components {
  readonly schemas: JsonObject = {};
  readonly responses: JsonObject = {};

  /** The common error body, with `code` narrowed to `codes`. */
  errorSchema(codes: readonly ErrorCode[]): Json {
    const narrowed = this.schema(errorCodeSchema(codes));
    return { allOf: [{ $ref: '#/components/schemas/Error' }, { properties: { error: { properties: { code: narrowed } } } }] };
  }

  /** A shared error response for exactly these codes (of one status); returns its name. */
  errorResponse(codes: readonly ErrorCode[]): string {
    const name = codes.join('.');
    if (!(name in this.responses)) {
      const schema = this.errorSchema(codes);
      const status = codes[0] === undefined ? 0 : ERROR_CODES[codes[0]].status;
      this.responses[name] = response(errorDescription(codes), new Map(BODY_MEDIA_TYPES.map((type) => [type, [schema]])), status);
    }
    return name;
  }

  schema(schema: TSchema): Json {
    const name = NAMED_REQUESTS.get(schema) ?? (typeof schema.$id === 'string' ? schema.$id : undefined);
    if (name === undefined) return this.plain(schema);
    if (!(name in this.schemas)) {
      this.schemas[name] = {}; // reserve the name first: a schema may contain itself
      this.schemas[name] = this.plain(schema);
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  private plain(schema: TSchema): Json {
    const out: JsonObject = {};
    for (const [key, value] of Object.entries(schema)) {
      if (key === '$id') continue;
      out[key] = this.value(value);
    }
    return out;
  }

  private value(value: unknown): Json {
    if (Array.isArray(value)) return value.map((v) => this.value(v));
    if (value !== null && typeof value === 'object') return this.schema(value as TSchema);
    return value as Json;
  }
}
