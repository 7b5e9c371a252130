/**
 * `npm run openapi` (second step): the SDK's types, generated from the OpenAPI document
 * (docs/openapi.json) into `src/generated/api.ts`. Every named schema becomes an interface
 * (Customer, Project, Quota, the event bodies, ...); `Api['operations']` gives each operation's path
 * parameters, query, body and success response by operationId; `WebhookEvent` is the union of the
 * `webhooks` section. The SDK's methods are typed through these, so the package cannot drift from the
 * document: `types.test.ts` regenerates and compares.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { compile, type JSONSchema } from 'json-schema-to-typescript';

export const DOCUMENT = fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url));
export const GENERATED = fileURLToPath(new URL('../src/generated/api.ts', import.meta.url));

const PREFIX = '/api/public/v1';

type Schema = Record<string, unknown>;
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  description?: string;
  schema: Schema;
}
interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
  webhooks: Record<string, { post: { requestBody: { content: Record<string, { schema: { $ref: string } }> } } }>;
}

const object = (properties: Record<string, Schema>, required: string[]): Schema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
});

/** The parameters of one location as an object schema. */
function parameters(operation: Operation, location: 'path' | 'query'): Schema | undefined {
  const list = (operation.parameters ?? []).filter((p) => p.in === location);
  if (list.length === 0) return undefined;
  const properties = Object.fromEntries(list.map((p) => [p.name, p.description ? { ...p.schema, description: p.description } : p.schema]));
  return object(
    properties,
    list.filter((p) => p.required || location === 'path').map((p) => p.name),
  );
}

/** One operation: what it takes and what its success response carries. */
function operationSchema(operation: Operation): Schema {
  const sections: Record<string, Schema> = {};
  const path = parameters(operation, 'path');
  const query = parameters(operation, 'query');
  if (path) sections.path = path;
  if (query) sections.query = query;
  const body = operation.requestBody?.content['application/json']?.schema;
  if (body) sections.body = body;
  const success = Object.entries(operation.responses).find(([status]) => status.startsWith('2'));
  // A stream (server-sent events) documents its text; the SDK types its events itself.
  const content = success?.[1].content;
  const response = content?.['application/json']?.schema ?? content?.['text/event-stream']?.schema;
  if (!response) throw new Error(`${operation.operationId} documents no JSON or event-stream success response`);
  sections.response = response;
  return object(sections, Object.keys(sections));
}

const local = (schema: unknown): Schema => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"#/$defs/'));

export async function generateTypes(document: Document): Promise<string> {
  const operations: Record<string, Schema> = {};
  const routes: Record<string, { method: string; path: string }> = {};
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      operations[operation.operationId] = operationSchema(operation);
      routes[operation.operationId] = { method: method.toUpperCase(), path: path.slice(PREFIX.length) };
    }
  }
  const sorted = Object.fromEntries(Object.entries(operations).sort(([a], [b]) => a.localeCompare(b)));
  const events = Object.entries(document.webhooks).map(([event, { post }]) => {
    const ref = post.requestBody.content['application/json']?.schema.$ref ?? '';
    return [event, ref.slice(ref.lastIndexOf('/') + 1)] as const;
  });
  const root = {
    title: 'Api',
    description: 'Every operation of the partner API by operationId, and every webhook event by name.',
    ...object(
      {
        operations: object(sorted, Object.keys(sorted)),
        webhooks: object(
          Object.fromEntries(events.map(([event, name]) => [event, { $ref: `#/$defs/${name}` }])),
          events.map(([event]) => event),
        ),
      },
      ['operations', 'webhooks'],
    ),
    $defs: local(document.components.schemas),
  };
  const types = await compile(local(root) as JSONSchema, 'Api', {
    bannerComment: '',
    additionalProperties: false,
    unreachableDefinitions: true,
    format: true,
    style: { printWidth: 140, singleQuote: true },
  });
  const union = events.map(([, name]) => name).join(' | ');
  return [
    '// Generated by `npm run openapi` from docs/openapi.json (packages/sdk/scripts/generate-types.ts). Do not edit.',
    '',
    // The generator's "referenced by" notes say nothing a reader of this file needs.
    types.replace(/^( *)\/\*\*\n\1 \* This interface was referenced by [\s\S]*?\*\/\n/gm, ''),
    '/** Every event a webhook delivery can carry, discriminated by `event`. */',
    `export type WebhookEvent = ${union};`,
    '',
    '/** The name of every event. */',
    "export type WebhookEventName = WebhookEvent['event'];",
    '',
    `/** Each operation's method and path (under \`${PREFIX}\`). */`,
    'export const OPERATIONS = {',
    ...Object.keys(sorted).map((id) => `  ${id}: { method: '${routes[id]?.method}', path: '${routes[id]?.path}' },`),
    "} as const satisfies Record<keyof Api['operations'], { method: string; path: string }>;",
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const document = JSON.parse(readFileSync(DOCUMENT, 'utf8')) as Document;
  writeFileSync(GENERATED, await generateTypes(document));
  process.stdout.write(`wrote ${GENERATED}\n`);
}
