import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { http, partnerApi } from './client.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from './provisioning.ts';
import {
  type Case,
  DOCUMENT,
  documentAccepts,
  minimal,
  type Operation,
  objectCases,
  type Parameter,
  refusedValues,
  resolve,
} from './request-cases.ts';

/**
 * The OpenAPI document and the server agree on every request rule. Each operation of the committed
 * document gets the requests the document refuses (a required field missing, a wrong type, a value
 * outside a list, a pattern, a length or a range broken, an unknown field, key or query parameter, a
 * malformed header, no body where one is required, `null`) and must answer 400 VALIDATION_ERROR naming
 * the field; and the requests the document accepts (the smallest body, then each optional field and
 * query parameter in turn, the body after a byte-order mark, no body where it is optional) must not
 * answer VALIDATION_ERROR. The test client also checks every answer against the document.
 */
interface Probe {
  operation: string;
  method: string;
  path: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  /** Whether the operation takes an Idempotency-Key. */
  idempotent: boolean;
  body?: string;
  /** Where the document refuses the request; undefined when it accepts it. */
  refused?: { in: 'body' | 'query' | 'path' | 'header'; field: string };
  why: string;
}

/** Query strings, paths and forms carry text: a value is sent as its text. */
const asText = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));
/** What `fetch` can send as a header value (no NUL, no line break, Latin-1). */
const sendable = (text: string) => text !== '' && /^[\u0020-\u00ff]*$/.test(text);

function bodyProbes(operation: Operation, base: Omit<Probe, 'why'>): Probe[] {
  const probes: Probe[] = [];
  const body = operation.requestBody;
  if (!body) return probes;
  const mismatches: string[] = [];
  for (const [type, { schema }] of Object.entries(body.content)) {
    const form = type === 'application/x-www-form-urlencoded';
    const encode = (value: unknown) =>
      form
        ? new URLSearchParams(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, asText(v)])).toString()
        : JSON.stringify(value);
    const headers = { ...base.headers, 'content-type': type };
    const branches = resolve(schema).oneOf ?? [schema];
    for (const branch of branches) {
      const smallest = minimal(branch);
      const cases: Case[] = [{ value: smallest, why: 'the smallest body' }, ...objectCases(branch, smallest)];
      for (const c of cases) {
        // A form's values are text: a number sent there is the text of one.
        if (form && Object.values(c.value as object).some((v) => typeof v !== 'string')) continue;
        if (documentAccepts(schema, c.value) !== (c.field === undefined)) mismatches.push(`${operation.operationId}: ${c.why}`);
        probes.push({
          ...base,
          headers,
          body: encode(c.value),
          ...(c.field === undefined ? {} : { refused: { in: 'body', field: c.field } }),
          why: `${type}: ${c.why}`,
        });
      }
      if (!form) probes.push({ ...base, headers, body: `\uFEFF${encode(smallest)}`, why: 'the smallest body after a byte-order mark' });
    }
    if (form) continue;
    for (const [raw, why] of [
      ['null', 'null'],
      ['[]', 'a list'],
      ['"text"', 'a string'],
    ]) {
      probes.push({ ...base, headers, body: raw, refused: { in: 'body', field: '' }, why: `a body that is ${why}` });
    }
  }
  assert.deepEqual(mismatches, [], 'the generator judges these cases otherwise than the document does');
  if (body.required) probes.push({ ...base, refused: { in: 'body', field: '' }, why: 'no body where one is required' });
  else probes.push({ ...base, why: 'no body where it is optional' });
  return probes;
}

function parameterProbes(
  operation: Operation,
  parameters: Parameter[],
  base: Omit<Probe, 'why'>,
  pathOf: (over?: [string, string]) => string,
) {
  const probes: Probe[] = [];
  for (const parameter of parameters) {
    const where = parameter.in;
    for (const refused of refusedValues(parameter.schema, true)) {
      const text = asText(refused.value);
      const why = `${where} ${parameter.name} ${refused.why}`;
      const refusal = { in: where, field: parameter.name };
      if (where === 'query') probes.push({ ...base, query: { [parameter.name]: text }, refused: refusal, why });
      // An empty segment is another path, not a bad value.
      if (where === 'path' && text !== '') probes.push({ ...base, path: pathOf([parameter.name, text]), refused: refusal, why });
      if (where === 'header' && sendable(text))
        probes.push({ ...base, headers: { ...base.headers, [parameter.name]: text }, refused: refusal, why });
    }
    // A cursor is valid only as a list issued it (the document says so in words): no other value is.
    if (where === 'query' && parameter.name !== 'cursor') {
      const value = minimal(parameter.schema, parameter.name);
      assert.ok(documentAccepts(parameter.schema, value), `${operation.operationId}: ${parameter.name}=${asText(value)} is valid`);
      probes.push({ ...base, query: { [parameter.name]: asText(value) }, why: `with query ${parameter.name}` });
    }
  }
  probes.push({
    ...base,
    query: { unknown_param: '1' },
    refused: { in: 'query', field: 'unknown_param' },
    why: 'an unknown query parameter',
  });
  return probes;
}

const target = testDatabases()[0];
if (target) {
  describe('the document and the server agree on every request rule', () => {
    let server: TestServer;
    let p: Tokens;
    let pathValues: Record<string, string>;
    before(async () => {
      server = await startTestServer(target, {
        // Every host resolves to one public address: the document's example webhook URL is accepted offline.
        webhookResolver: { resolve: async () => ['93.184.216.34'] },
      });
      p = await partnerWithModes(server, 'rules');
      await activeCustomer(server, p.test, 'acme');
      const operations = await partnerApi<{ data: { id: string }[] }>(server, 'GET', '/customers/acme/operations', { token: p.test });
      pathValues = { id: 'acme', project: 'default', username: 'owner', operation_id: operations.body.data[0]?.id ?? '' };
    });
    after(() => server.stop());

    test('what the document refuses answers 400 VALIDATION_ERROR naming the field; what it accepts never does', async (t) => {
      const probes: Probe[] = [];
      for (const [template, operations] of Object.entries(DOCUMENT.paths)) {
        for (const [method, operation] of Object.entries(operations)) {
          const parameters = operation.parameters ?? [];
          for (const parameter of parameters.filter((q) => q.in === 'path')) {
            assert.ok(documentAccepts(parameter.schema, pathValues[parameter.name]), `${parameter.name}=${pathValues[parameter.name]}`);
          }
          const pathOf = (over?: [string, string]) =>
            template.replace(/\{([^}]+)\}/g, (_, name: string) =>
              encodeURIComponent(over?.[0] === name ? over[1] : (pathValues[name] ?? '')),
            );
          const base = {
            operation: operation.operationId,
            method: method.toUpperCase(),
            path: pathOf(),
            query: {},
            headers: {},
            idempotent: parameters.some((q) => q.name === 'Idempotency-Key'),
          };
          // A parameter is probed with the smallest body, so that it alone is what the document refuses.
          const json = operation.requestBody?.content['application/json']?.schema;
          const withBody = json
            ? { ...base, headers: { 'content-type': 'application/json' }, body: JSON.stringify(minimal(resolve(json).oneOf?.[0] ?? json)) }
            : base;
          const all = [...parameterProbes(operation, parameters, withBody, pathOf), ...bodyProbes(operation, base)];
          // The stream answers an accepted request by streaming: only its refusals are probed here.
          for (const probe of all) if (probe.refused || operation.operationId !== 'streamEvents') probes.push(probe);
        }
      }
      assert.ok(probes.length > 400, `${probes.length} requests`);

      const failures: string[] = [];
      const outcomes = new Map<string, number>();
      let key = 0;
      for (const probe of probes) {
        const query = new URLSearchParams(probe.query).toString();
        const headers = { ...probe.headers };
        // Accepted mutations carry a key of their own, so the header's valid form is exercised too.
        if (!probe.refused && probe.idempotent && !('Idempotency-Key' in headers)) headers['Idempotency-Key'] = `rules-${++key}`;
        const result = await http<{ error?: { code: string; details?: { errors?: { in: string; field: string }[] } } }>(
          server.partnerUrl,
          probe.method,
          `${probe.path}${query ? `?${query}` : ''}`,
          {
            ...(probe.operation === 'exchangeToken' ? {} : { token: p.test }),
            headers,
            ...(probe.body !== undefined ? { rawBody: probe.body } : {}),
            // A stream accepted by mistake would never end: the probe fails instead of waiting.
            signal: AbortSignal.timeout(10_000),
          },
        );
        const code = result.body?.error?.code ?? 'ok';
        const outcome = `${probe.refused ? 'refused' : 'accepted'} → ${result.status} ${code}`;
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        const label = `${probe.operation}: ${probe.why}`;
        if (result.status >= 500) failures.push(`${label}: ${result.status} ${result.text.slice(0, 200)}`);
        else if (probe.refused) {
          const { in: where, field } = probe.refused;
          const named = (result.body?.error?.details?.errors ?? []).some(
            (e) => e.in === where && (where === 'header' ? e.field.toLowerCase() === field.toLowerCase() : e.field === field),
          );
          if (result.status !== 400 || code !== 'VALIDATION_ERROR')
            failures.push(`${label}: the document refuses it, the server answered ${result.status} ${code}`);
          else if (!named) failures.push(`${label}: 400 without naming ${where} ${field}: ${result.text.slice(0, 300)}`);
        } else if (result.status === 400 && code === 'VALIDATION_ERROR') {
          failures.push(`${label}: the document accepts it, the server refused it: ${result.text.slice(0, 300)}`);
        }
      }
      t.diagnostic(`${probes.length} requests: ${[...outcomes].map(([k, n]) => `${k} ×${n}`).join(', ')}`);
      assert.deepEqual(failures.slice(0, 30), [], `${failures.length} of ${probes.length} requests disagree with the document`);
    });
  });
}
