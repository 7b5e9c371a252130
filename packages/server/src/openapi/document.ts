import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { CAPACITY_EVENTS } from '../capacity/events.ts';
import { CUSTOMER_EVENTS } from '../customers/events.ts';
import { type EventName, type EventSchemas, eventBodySchema, eventSchemaName, PING_DATA } from '../events/payloads.ts';
import { ERROR_CATALOGUE, type ErrorCode } from '../infra/errors/catalogue.ts';
import { emptyBodyIsObject } from '../infra/http/validation.ts';
import { KEY_PATTERN } from '../infra/idempotency/plugin.ts';
import type { Scope } from '../partners/scopes.ts';
import { PROJECT_EVENTS } from '../projects/events.ts';
import { CONTACT, INTRODUCTION, LICENSE, SCOPE_DESCRIPTIONS, TAGS, TOKEN_URL } from './introduction.ts';
import { WEBHOOK_SIGNATURE_SCHEME, webhooksSection } from './webhooks.ts';

/**
 * The partner API's OpenAPI 3.1 document, generated from the route schemas that validate requests and
 * responses (`@fastify/swagger` reads them as routes are added), with their tags, summaries and
 * descriptions. What the route schemas do not say is added here once for every route: the security
 * scope, whether a body may be left out, the error responses with their codes, the headers every
 * response carries, and the webhook payloads.
 */

const ErrorEnvelope = Type.Object(
  {
    status: Type.Literal('error'),
    error: Type.Object({
      code: Type.String({ description: 'One of the codes listed in the response description.' }),
      message: Type.String(),
      request_id: Type.String({ description: 'Equal to the `X-Request-Id` header.' }),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  },
  { $id: 'ErrorEnvelope', title: 'ErrorEnvelope' },
);

/** Every event kind's `data` schema, declared by the module that records it, in the document's order. */
const EVENT_DATA: { [K in EventName]: EventSchemas[K] } = { ping: PING_DATA, ...CUSTOMER_EVENTS, ...CAPACITY_EVENTS, ...PROJECT_EVENTS };
const EVENT_NAMES = Object.keys(EVENT_DATA) as EventName[];

const header = (description: string, type: 'string' | 'integer' = 'string') => ({ description, schema: { type } });

/** What the idempotency plugin accepts: 1 to 255 visible ASCII characters. */
const IDEMPOTENCY_KEY = { type: 'string', minLength: 1, maxLength: 255, pattern: KEY_PATTERN.source };
const HEADERS = {
  'X-Request-Id': header('The request id; equal to `error.request_id` on errors.'),
  'X-RateLimit-Limit': header("The partner's requests per minute.", 'integer'),
  'X-RateLimit-Remaining': header('Requests left in the current window.', 'integer'),
  'Retry-After': header('Seconds to wait before retrying.', 'integer'),
};

const CHANGE: ErrorCode[] = ['CONFLICT', 'NOT_READY', 'TOO_MANY_OPERATIONS'];
const CAPACITY: ErrorCode[] = [
  'PLAN_NOT_ALLOWED',
  'GPU_PROFILE_NOT_ALLOWED',
  'CUSTOMER_CAPACITY_EXCEEDED',
  'PARTNER_CAPACITY_EXCEEDED',
  'BUSY',
];

/**
 * The codes each operation answers beyond those every route of its kind shares (see `errorCodes`).
 * One table, beside the catalogue, so the document lists them by status; a route missing here fails
 * the OpenAPI test.
 */
export const OPERATION_ERRORS: Record<string, ErrorCode[]> = {
  exchangeToken: ['UNAUTHORIZED', 'PARTNER_SUSPENDED', 'PARTNER_NOT_READY', 'RATE_LIMITED'],
  whoami: [],
  createCustomer: ['ALREADY_EXISTS', 'LIMIT_REACHED', 'TOO_MANY_OPERATIONS', ...CAPACITY],
  listCustomers: [],
  getCustomer: [],
  deleteCustomer: CHANGE,
  suspendCustomer: CHANGE,
  resumeCustomer: CHANGE,
  createProject: ['ALREADY_EXISTS', 'LIMIT_REACHED', ...CHANGE],
  listProjects: [],
  getProject: [],
  deleteProject: CHANGE,
  createUser: ['ALREADY_EXISTS', ...CHANGE],
  listUsers: [],
  getUser: [],
  deleteUser: CHANGE,
  createConsoleLogin: ['CONFLICT', 'USER_ACTION_REQUIRED'],
  listOperations: [],
  getOperation: [],
  listPlans: [],
  getCapacity: [],
  getQuota: [],
  putQuota: ['QUOTA_EXCEEDED', 'CONFLICT', 'NOT_READY', 'GPU_ENTITLEMENT_REDUCTION_BLOCKED', 'GPU_USAGE_UNAVAILABLE', ...CAPACITY],
  getCustomerPlan: [],
  putCustomerPlan: ['QUOTA_EXCEEDED', 'CONFLICT', 'NOT_READY', 'GPU_ENTITLEMENT_REDUCTION_BLOCKED', 'GPU_USAGE_UNAVAILABLE', ...CAPACITY],
  listUsage: [],
  getCustomerUsage: [],
  putWebhook: [],
  getWebhook: ['NOT_FOUND'],
  deleteWebhook: ['NOT_FOUND'],
  rotateWebhookSecret: ['NOT_FOUND', 'NOT_CONFIGURED', 'CONFLICT'],
  testWebhook: ['NOT_FOUND', 'NOT_CONFIGURED'],
  listWebhookDeliveries: [],
  listEvents: [],
  streamEvents: [],
  // The test helpers answer 404 to live tokens.
  testInjectFailure: ['NOT_FOUND'],
  testSetWorkloads: ['NOT_FOUND'],
  testSetRequiredActions: ['NOT_FOUND'],
  testAdvanceClock: ['NOT_FOUND'],
  testResetClock: ['NOT_FOUND'],
};

/** Which error codes a route can answer: the ones every route of its kind shares, then its own. */
function errorCodes(route: { method: string; url: string; scope: string | undefined; operationId: string | undefined }): ErrorCode[] {
  const codes: ErrorCode[] = ['VALIDATION_ERROR', 'INTERNAL_ERROR', 'UNAVAILABLE'];
  if (route.scope !== undefined) codes.push('UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED', 'PARTNER_NOT_READY');
  if (route.url.includes('{')) codes.push('NOT_FOUND');
  if (route.method !== 'GET' && route.scope !== undefined) codes.push('IDEMPOTENCY_KEY_REUSED', 'IDEMPOTENCY_KEY_IN_PROGRESS');
  for (const code of OPERATION_ERRORS[route.operationId ?? ''] ?? []) if (!codes.includes(code)) codes.push(code);
  return codes;
}

function errorResponses(codes: ErrorCode[]): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = ERROR_CATALOGUE[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, unknown> = {};
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const retry = list.some((code) => ERROR_CATALOGUE[code].retryable) && status !== 500;
    responses[String(status)] = {
      description: `Error codes: ${list.join(', ')}.`,
      // The same list, machine-readable: the contract check holds every error the suites provoke to it.
      // Not an enum in the schema: new codes may appear within v1 (partner-api.md, Errors rule 4).
      'x-error-codes': list,
      headers: {
        'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
        ...(retry ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}),
      },
      content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
    };
  }
  return responses;
}

interface Operation {
  operationId?: string;
  security?: unknown[];
  parameters?: Record<string, unknown>[];
  requestBody?: { required?: boolean };
  [OPTIONAL_BODY]?: true;
  responses?: Record<string, { description?: string; headers?: Record<string, unknown>; content?: unknown }>;
}
interface OpenApiDocument {
  paths?: Record<string, Record<string, Operation>>;
  [key: string]: unknown;
}

const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** Marks, between `transform` and `completeOperations`, an operation whose body may be left out. */
const OPTIONAL_BODY = 'x-optional-body';

/** What the route schemas do not say, added to every operation: headers, error responses, Idempotency-Key. */
function completeOperations(document: OpenApiDocument): OpenApiDocument {
  for (const [path, operations] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(operations)) {
      const authenticated = (operation.security ?? []).length > 0;
      const headers = authenticated
        ? {
            'X-Request-Id': ref('X-Request-Id'),
            'X-RateLimit-Limit': ref('X-RateLimit-Limit'),
            'X-RateLimit-Remaining': ref('X-RateLimit-Remaining'),
          }
        : { 'X-Request-Id': ref('X-Request-Id') };
      // @fastify/swagger marks every body required; a route that reads no body as `{}` takes none.
      if (operation[OPTIONAL_BODY] && operation.requestBody) operation.requestBody.required = false;
      delete operation[OPTIONAL_BODY];
      const responses = operation.responses ?? {};
      for (const response of Object.values(responses)) response.headers = { ...response.headers, ...headers };
      const scope = authenticated ? 'token' : undefined;
      Object.assign(
        responses,
        errorResponses(errorCodes({ method: method.toUpperCase(), url: path, scope, operationId: operation.operationId })),
      );
      operation.responses = responses;
      if (authenticated && method !== 'get') {
        operation.parameters = [
          ...(operation.parameters ?? []),
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            description:
              'Makes a retry safe: the same key within 24 hours answers with the first response. 1 to 255 visible ASCII characters.',
            schema: IDEMPOTENCY_KEY,
          },
        ];
      }
    }
  }
  return document;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
const isObject = (value: Json): value is { [key: string]: Json } => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Every schema with a `title` (Customer, Project, Quota, the event bodies, ...) becomes a named
 * component, referenced wherever it appears, so the document reads like the API's vocabulary and the
 * SDK's types get their names. Two different schemas with one title are a mistake in the source and
 * stop the build.
 */
function nameSchemas(document: OpenApiDocument): OpenApiDocument {
  const components = document.components as { schemas: Record<string, Json> };
  const named = components.schemas;
  const visit = (node: Json, root = false): Json => {
    if (Array.isArray(node)) return node.map((item) => visit(item));
    if (!isObject(node)) return node;
    const copy: { [key: string]: Json } = {};
    for (const [key, value] of Object.entries(node)) copy[key] = visit(value);
    if (isObject(copy.discriminator ?? null) && Array.isArray(copy.oneOf)) copy.discriminator = mapped(copy, named);
    const title = copy.title;
    if (root || typeof title !== 'string' || !('type' in copy || 'anyOf' in copy || 'oneOf' in copy)) return copy;
    const existing = named[title];
    if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(copy)) {
      throw new Error(`OpenAPI: two different schemas are titled ${title}; rename one of them`);
    }
    named[title] = copy;
    return { $ref: `#/components/schemas/${title}` };
  };
  for (const [name, schema] of Object.entries(named)) named[name] = visit(schema, true);
  document.paths = visit(document.paths as Json) as OpenApiDocument['paths'];
  document.webhooks = visit(document.webhooks as Json);
  components.schemas = Object.fromEntries(Object.entries(named).sort(([a], [b]) => a.localeCompare(b)));
  return document;
}

/**
 * A discriminator with its `mapping`: which value of the tag selects which named branch. Ajv, which
 * validates the requests, reads a discriminator without one (and refuses one with it); OpenAPI needs it
 * whenever the tag's values are not the branches' names.
 */
function mapped(schema: { [key: string]: Json }, named: Record<string, Json>): Json {
  const discriminator = schema.discriminator as { propertyName: string };
  const mapping: Record<string, string> = {};
  for (const branch of schema.oneOf as Json[]) {
    const target = isObject(branch) && typeof branch.$ref === 'string' ? branch.$ref : undefined;
    const resolved = target === undefined ? undefined : named[target.slice(target.lastIndexOf('/') + 1)];
    const tag = isObject(resolved ?? null)
      ? ((resolved as { properties?: Record<string, Json> }).properties?.[discriminator.propertyName] ?? null)
      : null;
    if (target === undefined || !isObject(tag))
      throw new Error(`OpenAPI: a discriminated branch must be a titled object with ${discriminator.propertyName}`);
    const values = tag.const !== undefined ? [tag.const] : Array.isArray(tag.enum) ? tag.enum : [];
    for (const value of values) mapping[String(value)] = target;
  }
  return { ...discriminator, mapping };
}

/**
 * The security requirement of a route's scope: the OAuth client-credentials token, which names the
 * scope, or the same token pasted as a bearer token (a scheme that names no scopes).
 */
function securityOf(scope: Scope | 'any' | undefined): Record<string, string[]>[] {
  if (scope === undefined) return [];
  return [{ partnerToken: scope === 'any' ? [] : [scope] }, { bearerToken: [] }];
}

export async function registerOpenApi(app: FastifyInstance, options: { version: string }): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Tenantry partner API',
        version: options.version,
        description: INTRODUCTION,
        contact: CONTACT,
        license: LICENSE,
      },
      servers: [{ url: '/' }],
      tags: TAGS,
      components: {
        securitySchemes: {
          partnerToken: {
            type: 'oauth2',
            description: `Exchange an API key at \`POST ${TOKEN_URL}\` for an access token (at most 15 minutes), carrying the scopes granted to the partner.`,
            flows: { clientCredentials: { tokenUrl: TOKEN_URL, scopes: SCOPE_DESCRIPTIONS } },
          },
          bearerToken: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'tnt_at_...',
            description: `The access token from \`POST ${TOKEN_URL}\`, sent as \`Authorization: Bearer <token>\`: paste one here to try calls.`,
          },
          webhookSignature: WEBHOOK_SIGNATURE_SCHEME,
        },
        headers: HEADERS,
        // Components pass through @fastify/swagger's conversion as the route schemas do, so the event
        // bodies and the schemas they share with routes (Project, Quota) come out the same.
        schemas: {
          ErrorEnvelope: ErrorEnvelope as never,
          ...Object.fromEntries(EVENT_NAMES.map((event) => [eventSchemaName(event), eventBodySchema(event, EVENT_DATA[event]) as never])),
        },
      },
      webhooks: webhooksSection(EVENT_NAMES) as never,
    },
    // Only the partner API itself: health, console pages and this document stay out.
    transform: ({ schema, url, route }) => {
      if (!url.startsWith('/api/public/v1/') || url.endsWith('/openapi.json')) return { schema: { ...schema, hide: true }, url };
      const scope = (route.config as { scope?: Scope | 'any' } | undefined)?.scope;
      const optionalBody = [route.preValidation].flat().includes(emptyBodyIsObject) ? { [OPTIONAL_BODY]: true } : {};
      return { schema: { ...schema, security: securityOf(scope), ...optionalBody } as typeof schema, url };
    },
    transformObject: (documentObject) =>
      nameSchemas(completeOperations((documentObject as { openapiObject: OpenApiDocument }).openapiObject)),
  });
}
