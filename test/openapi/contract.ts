import { type Agent, request as httpRequest } from 'node:http';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { decodeMsgpack } from '../../protocol/codec.js';

/**
 * The OpenAPI document as a checker of real replies: every reply is matched to its operation
 * (by operationId) and status, and its body is validated with ajv (JSON Schema 2020-12, the
 * dialect of OpenAPI 3.1) against the schema the document gives for its media type. Records which
 * (operation, status) pairs were seen, so a test can demand that every documented one was.
 */

export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface RequestSpec {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  agent?: Agent;
}

/** A request through node:http: it reports a reply even when the server closes mid-upload (413). */
export function send(port: number, spec: RequestSpec): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...spec.headers };
    if (spec.body !== undefined) headers['content-length'] = Buffer.byteLength(spec.body);
    const req = httpRequest({ host: '127.0.0.1', port, path: spec.path, method: spec.method, headers, ...(spec.agent ? { agent: spec.agent } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(spec.body);
  });
}

interface Operation {
  operationId: string;
  method: string;
  path: string;
  /** status → media type → validator */
  responses: Map<string, Map<string, ValidateFunction>>;
  requestBody?: ValidateFunction;
}

type Doc = { paths: Record<string, Record<string, OperationObject>>; components: { schemas: Record<string, object> } };
type OperationObject = {
  operationId: string;
  requestBody?: { content: Record<string, { schema: object }> };
  responses: Record<string, { headers?: Record<string, { required?: boolean }>; content: Record<string, { schema: object }> }>;
};

export class Contract {
  /** `operationId status` of every reply checked. */
  readonly seen = new Set<string>();

  private constructor(
    readonly operations: ReadonlyMap<string, Operation>,
    private readonly errorBody: ValidateFunction,
  ) {}

  /** Validates the document (swagger-parser), then compiles a validator for every response body. */
  static async load(document: object): Promise<Contract> {
    const doc = (await SwaggerParser.validate(structuredClone(document) as never)) as unknown as Doc;
    const ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true });
    const operations = new Map<string, Operation>();
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const responses = new Map<string, Map<string, ValidateFunction>>();
        for (const [status, response] of Object.entries(op.responses)) {
          if (!response.headers?.['x-request-id']?.required) throw new Error(`${op.operationId} ${status}: x-request-id is not a required header`);
          responses.set(status, new Map(Object.entries(response.content).map(([type, media]) => [type, ajv.compile(media.schema)])));
        }
        const body = op.requestBody?.content['application/json']?.schema;
        operations.set(op.operationId, { operationId: op.operationId, method, path, responses, ...(body ? { requestBody: ajv.compile(body) } : {}) });
      }
    }
    const errorSchema = doc.components.schemas.Error;
    if (!errorSchema) throw new Error('no Error schema in components');
    return new Contract(operations, ajv.compile(errorSchema));
  }

  operation(operationId: string): Operation {
    const op = this.operations.get(operationId);
    if (!op) throw new Error(`no operation ${operationId} in the document`);
    return op;
  }

  /** Throws unless `body` is valid for the operation's request body (keeps the test's own requests honest). */
  checkRequest(operationId: string, body: unknown): void {
    const validate = this.operation(operationId).requestBody;
    if (!validate) throw new Error(`${operationId} takes no body`);
    if (!validate(body)) throw new Error(`request body of ${operationId} does not match the document: ${JSON.stringify(validate.errors)}`);
  }

  /** Checks one reply against the document; returns the decoded body. */
  check(operationId: string, reply: RawReply): unknown {
    const op = this.operation(operationId);
    const what = `${operationId} (${op.method.toUpperCase()} ${op.path}) → ${reply.status}`;
    const media = op.responses.get(String(reply.status));
    if (!media)
      throw new Error(`${what}: status not in the document (documented: ${[...op.responses.keys()].join(', ')}); body ${reply.body.toString('utf8', 0, 300)}`);
    const body = this.validateBody(what, media, reply);
    this.seen.add(`${operationId} ${reply.status}`);
    return body;
  }

  /** For 404/405, which belong to no operation: the common error body with the given code. */
  checkError(reply: RawReply, code: string): void {
    const body = decode(reply, contentTypeOf(reply));
    if (!this.errorBody(body)) throw new Error(`error body does not match Error: ${JSON.stringify(this.errorBody.errors)}`);
    if ((body as { error: { code: string } }).error.code !== code) throw new Error(`expected code ${code}, got ${JSON.stringify(body)}`);
  }

  /** Every documented `operationId status` pair. */
  documented(): string[] {
    return [...this.operations.values()].flatMap((op) => [...op.responses.keys()].map((status) => `${op.operationId} ${status}`));
  }

  private validateBody(what: string, media: ReadonlyMap<string, ValidateFunction>, reply: RawReply): unknown {
    if (!reply.headers['x-request-id']) throw new Error(`${what}: no x-request-id header`);
    const contentType = contentTypeOf(reply);
    const type = contentType.split(';')[0]?.trim() ?? '';
    const validate = media.get(type);
    if (!validate) throw new Error(`${what}: media type ${contentType} not in the document (documented: ${[...media.keys()].join(', ')})`);
    const body = decode(reply, type);
    if (!validate(body))
      throw new Error(
        `${what}: ${type} body does not match the document: ${JSON.stringify(validate.errors, null, 1)}\nbody: ${JSON.stringify(body).slice(0, 2000)}`,
      );
    return body;
  }
}

function contentTypeOf(reply: RawReply): string {
  const value = reply.headers['content-type'];
  return typeof value === 'string' ? value : '';
}

function decode(reply: RawReply, type: string): unknown {
  if (type.startsWith('application/msgpack')) return decodeMsgpack(new Uint8Array(reply.body));
  if (type.startsWith('application/json')) return JSON.parse(reply.body.toString('utf8'));
  return reply.body.toString('utf8');
}
