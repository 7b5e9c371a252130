import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { http, PARTNER_API, partnerApi } from './client.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from './provisioning.ts';

/**
 * Issue 13, section 4: no input gives 500. Every operation of the OpenAPI document is called with
 * hostile values in each path parameter, query parameter and body field: strings holding NUL or a
 * lone surrogate, very long strings, numbers at and beyond their limits, wrong types, deep
 * nesting and duplicate keys. Every answer must be below 500, in the envelope, and valid against
 * the document (the test client checks each response against it).
 */
interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  $ref?: string;
  anyOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  format?: string;
  pattern?: string;
}
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  schema: Schema;
}
interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema: Schema }> };
}

const DOCUMENT = JSON.parse(readFileSync(fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url)), 'utf8')) as {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
};

const resolve = (schema: Schema): Schema =>
  schema.$ref ? resolve(DOCUMENT.components.schemas[schema.$ref.split('/').pop() as string] as Schema) : schema;

const LONG = 'x'.repeat(10_000);
/** Values that break naive code: one list for every field, whatever its declared type. */
const HOSTILE: unknown[] = [
  'nul\u0000inside',
  '\u0000',
  'lone \ud800 surrogate',
  '\udfff',
  LONE_PAIR(),
  LONG,
  '',
  ' ',
  '../../etc/passwd',
  "'; drop table customers; --",
  '%00',
  '\u202e\u0000',
  2 ** 31,
  2 ** 53 + 2,
  -(2 ** 63),
  1e308,
  -1,
  0,
  0.5,
  true,
  null,
  [],
  ['\u0000'],
  {},
  { '\u0000key': 1 },
  { nested: { deeper: ['\ud800'] } },
];

function LONE_PAIR(): string {
  return '\udc00\ud800';
}

/** A body every required field of which has a plausible value, so mutations reach past "is required". */
function sampleOf(schema: Schema, name = ''): unknown {
  const s = resolve(schema);
  if (s.default !== undefined) return s.default;
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  if (s.anyOf) return sampleOf(s.anyOf[0] as Schema, name);
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [key, child] of Object.entries(s.properties ?? {})) out[key] = sampleOf(child, key);
      return out;
    }
    case 'array':
      return [];
    case 'integer':
    case 'number':
      return s.minimum ?? 1;
    case 'boolean':
      return true;
    default:
      if (s.format === 'email') return 'fuzz@example.com';
      if (s.format === 'date-time') return '2026-01-01T00:00:00Z';
      if (name === 'url') return 'https://hooks.fuzz.example/tenantry';
      return 'fuzz';
  }
}

/** Every (dotted path, value) mutation of a sample body. */
function* mutations(sample: unknown, path: string[] = []): Generator<[string[], unknown]> {
  if (sample === null || typeof sample !== 'object' || Array.isArray(sample)) return;
  for (const [key, value] of Object.entries(sample)) {
    for (const hostile of HOSTILE) yield [[...path, key], hostile];
    yield* mutations(value, [...path, key]);
  }
}

function withValue(sample: unknown, path: string[], value: unknown): unknown {
  const copy = structuredClone(sample) as Record<string, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string, unknown>;
  node[path.at(-1) as string] = value;
  return copy;
}

const asText = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

/** Percent-encoding that also sends a lone surrogate, as the bytes a hostile client would (WTF-8). */
function percentEncode(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    const next = text.charCodeAt(i + 1);
    if (unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      out += encodeURIComponent(text.slice(i, i + 2));
      i++;
    } else if (unit >= 0xd800 && unit <= 0xdfff) {
      out += [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join('');
    } else {
      out += encodeURIComponent(text[i] as string);
    }
  }
  return out;
}

for (const target of testDatabases()) {
  describe(`no input gives 500 [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    let operationId: string;
    before(async () => {
      server = await startTestServer(target, {
        // Every host resolves to one public address: webhook URLs are accepted without a network.
        webhookResolver: { resolve: async () => ['93.184.216.34'] },
      });
      p = await partnerWithModes(server, 'fuzzer');
      await activeCustomer(server, p.live, 'fuzzed');
      const operations = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/customers/fuzzed/operations', { token: p.live });
      operationId = operations.body.data[0]?.id ?? 'op_none';
      await activeCustomer(server, p.test, 'fuzzed');
    });
    after(() => server.stop());

    const requests: { label: string; method: string; path: string; body?: string; token: 'live' | 'test' | 'none' }[] = [];

    const valid = (name: string): string =>
      ({ id: 'fuzzed', project: 'default', username: 'owner', operation_id: operationId })[name] ?? 'fuzz';

    test('every operation of the document, with hostile path, query and body values', async (t) => {
      for (const [template, operations] of Object.entries(DOCUMENT.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          const relative = template.slice(PARTNER_API.length);
          const token = relative.startsWith('/test-helpers') ? 'test' : relative === '/auth/token' ? 'none' : 'live';
          const params = operation.parameters ?? [];
          const pathOf = (override?: [string, string]) =>
            relative.replace(/\{([^}]+)\}/g, (_, name: string) =>
              percentEncode(override && override[0] === name ? override[1] : valid(name)),
            );
          const bodySchema = operation.requestBody?.content['application/json']?.schema;
          const sample = bodySchema ? sampleOf(bodySchema) : undefined;
          const base = { method: method.toUpperCase(), token } as const;
          for (const param of params.filter((p) => p.in === 'path')) {
            for (const hostile of HOSTILE) {
              requests.push({
                ...base,
                label: `path ${param.name}=${asText(hostile).slice(0, 20)}`,
                path: pathOf([param.name, asText(hostile)]),
              });
            }
          }
          for (const param of params.filter((p) => p.in === 'query')) {
            for (const hostile of HOSTILE) {
              requests.push({ ...base, label: `query ${param.name}`, path: `${pathOf()}?${param.name}=${percentEncode(asText(hostile))}` });
            }
          }
          if (sample !== undefined) {
            const body = (value: unknown) => JSON.stringify(value);
            for (const [path, hostile] of mutations(sample)) {
              requests.push({
                ...base,
                label: `body ${path.join('.')}=${asText(hostile).slice(0, 20)}`,
                path: pathOf(),
                body: body(withValue(sample, path, hostile)),
              });
            }
            for (const hostile of HOSTILE)
              requests.push({ ...base, label: `whole body ${asText(hostile).slice(0, 20)}`, path: pathOf(), body: body(hostile) });
            const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
            const deepObject = `${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}`;
            const firstKey = Object.keys(sample as object)[0] ?? 'x';
            for (const raw of [
              deep,
              deepObject,
              `{"${firstKey}":${deep}}`,
              `{"${firstKey}":"a","${firstKey}":"\\u0000"}`,
              `{"${firstKey}":"\\ud800"}`,
              '{"__proto__":{"polluted":true}}',
              '{"constructor":{"prototype":{"polluted":true}}}',
              `{"${firstKey}":${'1'.repeat(400)}}`,
              '\u0000',
            ]) {
              requests.push({ ...base, label: `raw body ${raw.slice(0, 24)}`, path: pathOf(), body: raw });
            }
          }
        }
      }
      assert.ok(requests.length > 1000, `the fuzz reaches every operation (${requests.length} requests)`);

      const failures: string[] = [];
      const statuses = new Map<string, number>();
      for (const request of requests) {
        const headers: Record<string, string> = request.body !== undefined ? { 'content-type': 'application/json' } : {};
        const token = request.token === 'live' ? p.live : request.token === 'test' ? p.test : undefined;
        let status: number;
        let text: string;
        try {
          const result = await http(server.partnerUrl, request.method, `${PARTNER_API}${request.path}`, {
            headers,
            ...(token ? { token } : {}),
            ...(request.body !== undefined ? { rawBody: request.body } : {}),
          });
          status = result.status;
          text = result.text;
          const code = (result.body as { error?: { code?: string } } | undefined)?.error?.code ?? 'ok';
          statuses.set(`${status} ${code}`, (statuses.get(`${status} ${code}`) ?? 0) + 1);
          if (status >= 400) {
            const body = result.body as { status?: string; error?: { code?: string; request_id?: string } };
            if (body?.status !== 'error' || !body.error?.code)
              failures.push(`${request.method} ${request.path} ${request.label}: not the envelope: ${text.slice(0, 200)}`);
            else if (body.error.request_id !== result.headers.get('x-request-id'))
              failures.push(`${request.method} ${request.path} ${request.label}: request id differs from X-Request-Id`);
          }
        } catch (error) {
          failures.push(`${request.method} ${request.path.slice(0, 80)} ${request.label}: ${(error as Error).message.slice(0, 300)}`);
          continue;
        }
        if (status >= 500)
          failures.push(`${request.method} ${request.path.slice(0, 80)} ${request.label}: ${status} ${text.slice(0, 200)}`);
      }
      t.diagnostic(`${requests.length} requests: ${[...statuses].map(([k, n]) => `${k} ×${n}`).join(', ')}`);
      assert.deepEqual(failures.slice(0, 25), [], `${failures.length} of ${requests.length} requests failed`);
      assert.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution');
    });
  });
}
