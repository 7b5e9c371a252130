import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { operationFor } from '../../server/test/contract.ts';
import { Tenantry } from './index.ts';

/**
 * The SDK checked against the contract: every namespace method calls a method and path the committed
 * OpenAPI document has, and every documented partner operation (test helpers aside) has an SDK method.
 */
const document = JSON.parse(readFileSync(fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url)), 'utf8')) as {
  paths: Record<string, Record<string, { operationId: string }>>;
};
const PREFIX = '/api/public/v1';

test('every SDK method calls a documented operation, and every documented operation has one', async () => {
  const called = new Map<string, string>();
  let current = '';
  const fetchStub = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    if (url.pathname === `${PREFIX}/auth/token`) {
      return new Response(JSON.stringify({ access_token: 't', expires_in: 900 }), { status: 200 });
    }
    const operation = operationFor(init?.method ?? 'GET', url.pathname)?.operationId;
    assert.ok(operation, `${current}: ${init?.method} ${url.pathname} is not in docs/openapi.json`);
    called.set(operation, current);
    if (operation === 'streamEvents') {
      const event = { id: 'dlv_1', event: 'ping', created_at: '', partner_id: 'p', data: { message: 'hi' } };
      return new Response(`id: dlv_1\nevent: ping\ndata: ${JSON.stringify(event)}\n\n`, {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
      });
    }
    // Lists answer an empty page; everything else an object that also ends a wait at once.
    const data = operation.startsWith('list') ? [] : { finished_at: 'x', customer: {}, operation: { id: 'op' } };
    const body = { status: 'success', data, pagination: { next_cursor: null } };
    return new Response(JSON.stringify(body), { status: 200 });
  }) as typeof fetch;
  const client = new Tenantry({ apiKey: 'tnt_live_x', baseUrl: 'http://127.0.0.1:9', fetch: fetchStub });

  // Calls every function found under the client's namespaces, with placeholder arguments.
  const visit = async (node: unknown, name: string): Promise<void> => {
    if (typeof node === 'function') {
      current = name;
      // The event stream runs until stopped: one event is enough to see which operation it calls.
      const result = name === 'events.stream' ? node({}) : node('c1', 'p1', {});
      if (name === 'events.stream') {
        for await (const _ of result as AsyncIterable<unknown>) break;
        return;
      }
      if (result && typeof (result as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
        for await (const _ of result as AsyncIterable<unknown>);
      } else await result;
      return;
    }
    if (node && typeof node === 'object') for (const [key, child] of Object.entries(node)) await visit(child, `${name}.${key}`);
  };
  for (const namespace of ['auth', 'customers', 'operations', 'catalog', 'capacity', 'usage', 'webhook', 'events'] as const) {
    await visit(client[namespace], namespace);
  }

  const documented = Object.values(document.paths)
    .flatMap((operations) => Object.values(operations).map((o) => o.operationId))
    .filter((id) => !id.startsWith('test') && id !== 'exchangeToken');
  const missing = documented.filter((id) => !called.has(id));
  assert.deepEqual(missing, [], 'documented operations without an SDK method');
});
