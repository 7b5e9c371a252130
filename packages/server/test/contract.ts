import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

/**
 * The contract check: every partner API response the test suites receive is validated against the
 * committed OpenAPI document (docs/openapi.json), by operation and status: the body against its
 * schema, and the documented headers' presence. An undocumented status is a failure too. The test
 * client calls `checkContract` for every response, so each integration test is also a contract test.
 */
const PREFIX = '/api/public/v1';
const SCHEMA_BASE = 'https://tenantry.invalid/schemas/';
const DOCUMENT_PATH = fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url));

interface Response {
  headers?: Record<string, unknown>;
  'x-error-codes'?: string[];
  content?: { 'application/json'?: { schema?: unknown } };
}
interface Operation {
  operationId: string;
  responses: Record<string, Response>;
}
interface Route {
  method: string;
  pattern: RegExp;
  operation: Operation;
}

let routes: Route[] | undefined;
let ajv: Ajv2020 | undefined;
let webhooks: Record<string, { post: { requestBody: { content: { 'application/json': { schema: unknown } } } } }> = {};
const validators = new Map<string, ValidateFunction>();

function load(): Route[] {
  if (routes) return routes;
  const document = JSON.parse(readFileSync(DOCUMENT_PATH, 'utf8')) as {
    paths: Record<string, Record<string, Operation>>;
    components: { schemas: Record<string, unknown> };
    webhooks: typeof webhooks;
  };
  ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (a: Ajv2020) => void)(ajv);
  // The document's named schemas, each registered under an absolute id its references are rewritten to.
  for (const [name, schema] of Object.entries(document.components.schemas))
    ajv.addSchema({ ...(absolute(schema) as object), $id: `${SCHEMA_BASE}${name}` });
  webhooks = document.webhooks;
  routes = [];
  for (const [path, operations] of Object.entries(document.paths)) {
    const pattern = new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    for (const [method, operation] of Object.entries(operations)) routes.push({ method: method.toUpperCase(), pattern, operation });
  }
  // Literal segments win over parameters (`/customers/{id}` must not shadow a longer literal path).
  routes.sort((a, b) => b.pattern.source.length - a.pattern.source.length);
  return routes;
}

const absolute = (schema: unknown): unknown => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${SCHEMA_BASE}`));

function validator(operation: Operation, status: string, schema: unknown): ValidateFunction {
  const key = `${operation.operationId} ${status}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = (ajv as Ajv2020).compile(absolute(schema) as object);
    validators.set(key, validate);
  }
  return validate;
}

/** The documented operation a request reaches, by method and concrete path (`/api/public/v1/...`). */
export function operationFor(method: string, pathname: string): Operation | undefined {
  return load().find((r) => r.method === method.toUpperCase() && r.pattern.test(pathname))?.operation;
}

export function checkContract(method: string, url: string, status: number, headers: Headers, body: unknown): void {
  const { pathname } = new URL(url);
  if (!pathname.startsWith(`${PREFIX}/`) || pathname === `${PREFIX}/openapi.json`) return;
  const operation = operationFor(method, pathname);
  // Unknown routes and methods answer the error envelope (404, 405), which every document response shares.
  if (!operation) return;
  const documented = operation.responses[String(status)];
  assert.ok(documented, `contract: ${method} ${pathname} (${operation.operationId}) answered ${status}, which the document does not list`);
  for (const name of Object.keys(documented.headers ?? {})) {
    if (name === 'Retry-After') continue;
    assert.ok(headers.has(name), `contract: ${method} ${pathname} ${status} lacks the documented header ${name}`);
  }
  const codes = documented['x-error-codes'];
  if (codes) {
    const code = (body as { error?: { code?: string } } | undefined)?.error?.code ?? '';
    assert.ok(
      codes.includes(code),
      `contract: ${method} ${pathname} (${operation.operationId}) answered ${status} ${code}, which the document does not list for it (OPERATION_ERRORS in src/openapi/document.ts)`,
    );
  }
  const schema = documented.content?.['application/json']?.schema;
  if (schema === undefined) return;
  const validate = validator(operation, String(status), schema);
  assert.ok(
    validate(body),
    `contract: ${method} ${pathname} ${status} does not match ${operation.operationId}'s schema: ${JSON.stringify(validate.errors)}\n${JSON.stringify(body)}`,
  );
}

/**
 * A webhook delivery's body against the document's `webhooks` entry for its event: what the SDK's
 * `WebhookEvent` union promises a receiver.
 */
export function checkWebhookBody(body: { event: string }): void {
  load();
  const entry = webhooks[body.event];
  assert.ok(entry, `contract: the document has no webhooks entry for ${body.event}`);
  const key = `webhook ${body.event}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = (ajv as Ajv2020).compile(absolute(entry.post.requestBody.content['application/json'].schema) as object);
    validators.set(key, validate);
  }
  assert.ok(
    validate(body),
    `contract: the ${body.event} delivery does not match the document: ${JSON.stringify(validate.errors)}\n${JSON.stringify(body)}`,
  );
}
