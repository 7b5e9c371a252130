import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { assertError, fieldErrors, type HttpResult, operatorApi, partnerApi } from '../../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';
import { activeCustomer, partnerWithModes, type Tokens } from '../../../test/provisioning.ts';
import { appendAttempts } from '../../webhooks/store.ts';
import { newId } from '../ids.ts';

/**
 * "A cursor belongs to the list that issued it; used on another list it answers 400 VALIDATION_ERROR."
 * A list is one partner's, in one mode: a cursor another partner's token (or the same partner's
 * other mode) sends is refused like a cursor of another list, on every paginated list of the
 * partner API, and the refusal tells nothing about whose cursor it was.
 */
const PREFIX = '/api/public/v1';

/** Every paginated list of the partner API (its path in the OpenAPI document) and a path of it that has two pages. */
const LISTS: Record<string, string> = {
  '/customers': '/customers',
  '/customers/{id}/projects': '/customers/c1/projects',
  '/customers/{id}/users': '/customers/c1/users',
  '/customers/{id}/operations': '/customers/c1/operations',
  '/catalog/plans': '/catalog/plans',
  '/usage': '/usage',
  '/webhook/deliveries': '/webhook/deliveries',
  '/events': '/events',
};

interface ListPage {
  data: unknown[];
  pagination: { next_cursor: string | null };
}

function documentedLists(): string[] {
  const path = fileURLToPath(new URL('../../../../../docs/openapi.json', import.meta.url));
  const document = JSON.parse(readFileSync(path, 'utf8')) as {
    paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>;
  };
  const lists: string[] = [];
  for (const [route, operations] of Object.entries(document.paths)) {
    if (!route.startsWith(PREFIX)) continue;
    for (const operation of Object.values(operations)) {
      if (operation.parameters?.some((p) => p.in === 'query' && p.name === 'cursor')) lists.push(route.slice(PREFIX.length));
    }
  }
  return lists.sort();
}

for (const target of testDatabases()) {
  describe(`a cursor pages only the partner's and mode's list that issued it [${target.name}]`, () => {
    let server: TestServer;
    let a: Tokens;
    let b: Tokens;

    /** Two of everything each list shows, for one partner in one mode. */
    const seed = async (partner: string, mode: 'live' | 'test', token: string) => {
      await activeCustomer(server, token, 'c1');
      await activeCustomer(server, token, 'c2');
      const project = await partnerApi(server, 'POST', '/customers/c1/projects', { token, body: { name: 'second' } });
      assert.equal(project.status, 202, project.text);
      const user = await partnerApi(server, 'POST', '/customers/c1/users', {
        token,
        body: { username: 'second', email: `second@${partner}-${mode}.example` },
      });
      assert.equal(user.status, 201, user.text);
      const at = server.clock.now();
      await appendAttempts(
        server.database.db,
        [1, 2].map((attempt) => ({
          partner_id: partner,
          mode,
          delivery_id: newId('delivery', server.clock.nowMs()),
          event: 'ping',
          delivered: false,
          attempt,
          status: null,
          error: 'connection refused',
          at,
        })),
      );
    };

    const page = (token: string, path: string, cursor?: string) =>
      partnerApi<ListPage>(server, 'GET', `${path}?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { token });
    const firstCursor = async (token: string, path: string) => {
      const first = await page(token, path);
      assert.equal(first.status, 200, first.text);
      assert.ok(first.body.pagination.next_cursor, `${path} has a second page`);
      return first.body.pagination.next_cursor;
    };
    /** The refusal a cursor of another list gets: what a foreign cursor's must not be told apart from. */
    const otherListAnswer = async (token: string, path: string) => {
      const otherPath = path === '/customers' ? '/events' : '/customers';
      return assertError(await page(token, path, await firstCursor(token, otherPath)), 400, 'VALIDATION_ERROR');
    };
    const assertRefused = async (result: HttpResult<ListPage>, token: string, path: string, issuer: string) => {
      const error = assertError(result, 400, 'VALIDATION_ERROR');
      assert.deepEqual(
        fieldErrors(error).map((problem) => [problem.in, problem.field]),
        [['query', 'cursor']],
      );
      assert.deepEqual(error.details, (await otherListAnswer(token, path)).details, 'answered as a cursor of another list');
      assert.ok(!result.text.includes(issuer), "the answer does not name the cursor's partner");
    };

    before(async () => {
      server = await startTestServer(target);
      a = await partnerWithModes(server, 'scope-a');
      b = await partnerWithModes(server, 'scope-b');
      for (const partner of [a, b]) {
        const plans = await operatorApi(server, 'PUT', `/partners/${partner.id}/plans`, { body: { plans: ['standard', 'gpu-a100'] } });
        assert.equal(plans.status, 200, plans.text);
      }
      await seed(a.id, 'live', a.live);
      await seed(a.id, 'test', a.test);
      await seed(b.id, 'live', b.live);
    });
    after(() => server.stop());

    test('every paginated list of the partner API is covered here', () => {
      assert.deepEqual(documentedLists(), Object.keys(LISTS).sort());
    });

    for (const [list, path] of Object.entries(LISTS)) {
      test(`${list}: another partner's cursor and the other mode's answer 400 VALIDATION_ERROR on cursor`, async () => {
        const cursor = await firstCursor(a.live, path);
        const own = await page(a.live, path, cursor);
        assert.equal(own.status, 200, `the issuing list takes its cursor: ${own.text}`);

        await assertRefused(await page(b.live, path, cursor), b.live, path, a.id);
        await assertRefused(await page(a.test, path, cursor), a.test, path, a.id);
        const testCursor = await firstCursor(a.test, path);
        await assertRefused(await page(a.live, path, testCursor), a.live, path, a.id);
      });
    }
  });
}
