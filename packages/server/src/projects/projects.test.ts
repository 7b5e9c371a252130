import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, eventsOf, partnerWithModes, type Tokens, waitForOperation, waitGone } from '../../test/provisioning.ts';

interface ProjectBody {
  name: string;
  state: string;
  namespace: string;
  cidr: string | null;
}

for (const target of testDatabases()) {
  describe(`projects [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    before(async () => {
      server = await startTestServer(target);
      p = await partnerWithModes(server, 'proj', {
        limits: { max_projects_per_customer: 3, rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 },
      });
      await activeCustomer(server, p.live, 'acme');
    });
    after(() => server.stop());

    const create = (customer: string, name: string, token = p.live) =>
      partnerApi<{ data: { project: ProjectBody; operation: { id: string; type: string } } }>(
        server,
        'POST',
        `/customers/${customer}/projects`,
        {
          token,
          body: { name },
        },
      );

    test('create answers 202; the operation makes it ready with a namespace and its own address range; project.ready is recorded', async () => {
      const created = await create('acme', 'web');
      assert.equal(created.status, 202, created.text);
      assert.equal(created.body.data.project.state, 'provisioning');
      assert.equal(created.body.data.project.namespace, 'proj-acme-web', '<partner prefix>-<customer id>-<project>');
      assert.equal(created.body.data.operation.type, 'project.create');
      const done = await waitForOperation(server, p.live, 'acme', created.body.data.operation.id);
      assert.equal(done.status, 'succeeded');
      const read = await partnerApi<{ data: ProjectBody }>(server, 'GET', '/customers/acme/projects/web', { token: p.live });
      assert.equal(read.body.data.state, 'ready');
      const first = await partnerApi<{ data: ProjectBody }>(server, 'GET', '/customers/acme/projects/default', { token: p.live });
      assert.ok(
        read.body.data.cidr && first.body.data.cidr && read.body.data.cidr !== first.body.data.cidr,
        'each project has its own range',
      );
      const event = (await eventsOf(server, 'proj')).find((e) => e.type === 'project.ready');
      assert.equal(event?.data.operation_id, created.body.data.operation.id);
      assert.equal((event?.data.project as ProjectBody | undefined)?.name, 'web');
      assert.equal(event?.data.state, 'ready');
      assert.equal(event?.data.error, null);
    });

    test('list by name with pagination; unknown project 404; bad name 400', async () => {
      const page = await partnerApi<{ data: ProjectBody[]; pagination: { next_cursor: string | null } }>(
        server,
        'GET',
        '/customers/acme/projects?limit=1',
        { token: p.live },
      );
      assert.deepEqual(
        page.body.data.map((x) => x.name),
        ['default'],
      );
      const rest = await partnerApi<{ data: ProjectBody[] }>(
        server,
        'GET',
        `/customers/acme/projects?limit=1&cursor=${encodeURIComponent(page.body.pagination.next_cursor ?? '')}`,
        { token: p.live },
      );
      assert.deepEqual(
        rest.body.data.map((x) => x.name),
        ['web'],
      );
      assertError(await partnerApi(server, 'GET', '/customers/acme/projects/nope', { token: p.live }), 404, 'NOT_FOUND');
      assertError(await create('acme', 'Not_A_Label'), 400, 'VALIDATION_ERROR');
      assertError(await create('nobody', 'web'), 404, 'NOT_FOUND');
    });

    test('ALREADY_EXISTS for a taken name or namespace; LIMIT_REACHED with max and current', async () => {
      const dup = assertError(await create('acme', 'web'), 409, 'ALREADY_EXISTS');
      assert.equal(dup.details?.field, 'name');
      // acme + "x-y" and acme-x + "y" would both be namespace proj-acme-x-y.
      await activeCustomer(server, p.live, 'acme-x', { owner: { username: 'o', email: 'o@acme-x.example' } });
      const third = await create('acme', 'x-y');
      assert.equal(third.status, 202);
      const clash = assertError(await create('acme-x', 'y'), 409, 'ALREADY_EXISTS');
      assert.equal(clash.details?.namespace, 'proj-acme-x-y');
      const limit = assertError(await create('acme', 'fourth'), 403, 'LIMIT_REACHED');
      assert.deepEqual({ max: limit.details?.max, current: limit.details?.current }, { max: 3, current: 3 });
    });

    test('an organization and a project namespace never share a name: ALREADY_EXISTS names the other, nothing is written', async () => {
      // globex's first project is proj-globex-default; a customer globex-default would be proj-globex-default too.
      await activeCustomer(server, p.live, 'globex', { owner: { username: 'o', email: 'o@globex.example' } });
      const customer = await partnerApi(server, 'POST', '/customers', {
        token: p.live,
        body: { id: 'globex-default', owner: { username: 'o', email: 'o@gd.example' } },
      });
      const refused = assertError(customer, 409, 'ALREADY_EXISTS');
      assert.equal(refused.details?.field, 'id');
      assert.match(refused.message, /project default of customer globex/);
      assertError(await partnerApi(server, 'GET', '/customers/globex-default', { token: p.live }), 404, 'NOT_FOUND');
      // The other way round: customer web-app exists (proj-web-app); customer web cannot name a project app.
      await activeCustomer(server, p.live, 'web-app', { owner: { username: 'o', email: 'o@web-app.example' } });
      await activeCustomer(server, p.live, 'web', { owner: { username: 'o', email: 'o@web.example' } });
      const project = assertError(await create('web', 'app'), 409, 'ALREADY_EXISTS');
      assert.equal(project.details?.namespace, 'proj-web-app');
      assert.match(project.message, /customer web-app/);
      // And a new customer whose first project would be an existing organization's name.
      await activeCustomer(server, p.live, 'tool-box', { owner: { username: 'o', email: 'o@tool-box.example' } });
      const first = assertError(
        await partnerApi(server, 'POST', '/customers', {
          token: p.live,
          body: { id: 'tool', project: 'box', owner: { username: 'o', email: 'o@tool.example' } },
        }),
        409,
        'ALREADY_EXISTS',
      );
      assert.deepEqual([first.details?.field, first.details?.namespace], ['project', 'proj-tool-box']);
      assertError(await partnerApi(server, 'GET', '/customers/tool', { token: p.live }), 404, 'NOT_FOUND');
    });

    test('two creations of one name at once: one 202, the other 409 ALREADY_EXISTS', async () => {
      await activeCustomer(server, p.live, 'racer', { owner: { username: 'o', email: 'o@racer.example' } });
      const results = await Promise.all([create('racer', 'same'), create('racer', 'same'), create('racer', 'same')]);
      const statuses = results.map((r) => r.status).sort();
      assert.deepEqual(statuses, [202, 409, 409], results.map((r) => r.text).join('\n'));
      for (const r of results.filter((x) => x.status === 409)) assertError(r, 409, 'ALREADY_EXISTS');
      const list = await partnerApi<{ data: ProjectBody[] }>(server, 'GET', '/customers/racer/projects', { token: p.live });
      assert.deepEqual(
        list.body.data.map((x) => x.name),
        ['default', 'same'],
      );
    });

    test('delete answers 202 with the project deleting; it disappears after finalization and project.deleted is recorded', async () => {
      const deleted = await partnerApi<{ data: { project: ProjectBody; operation: { id: string; type: string } } }>(
        server,
        'DELETE',
        '/customers/acme/projects/web',
        { token: p.live },
      );
      assert.equal(deleted.status, 202, deleted.text);
      assert.equal(deleted.body.data.project.state, 'deleting');
      assert.equal(deleted.body.data.operation.type, 'project.delete');
      await waitGone(server, p.live, '/customers/acme/projects/web');
      const done = await waitForOperation(server, p.live, 'acme', deleted.body.data.operation.id);
      assert.equal(done.status, 'succeeded');
      const event = (await eventsOf(server, 'proj')).find((e) => e.type === 'project.deleted');
      assert.deepEqual(event?.data, { customer_id: 'acme', project: 'web' });
      // The name is free again, as a new project.
      assert.equal((await create('acme', 'web')).status, 202);
    });

    test('suspend racing an immediate delete: both settle into one consistent state', async () => {
      await activeCustomer(server, p.live, 'contested', { owner: { username: 'o', email: 'o@contested.example' } });
      const [suspend, remove] = await Promise.all([
        partnerApi(server, 'POST', '/customers/contested/suspend', { token: p.live }),
        partnerApi<{ data: { status: string } }>(server, 'DELETE', '/customers/contested?mode=immediate', { token: p.live }),
      ]);
      assert.equal(remove.status, 202, remove.text);
      // The suspend came first (200), met the deletion under way (409), or came after it had finished (404).
      if (suspend.status === 404) assertError(suspend, 404, 'NOT_FOUND');
      else if (suspend.status !== 200) assertError(suspend, 409, 'CONFLICT');
      // Whichever came second, the customer ends deleted, never suspended-and-alive.
      await waitGone(server, p.live, '/customers/contested');
      const after = assertError(await partnerApi(server, 'POST', '/customers/contested/suspend', { token: p.live }), 404, 'NOT_FOUND');
      assert.ok(after);
    });
  });

  describe(`projects with a small address pool [${target.name}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(target, { sandboxAddressRanges: 2 });
    });
    after(() => server.stop());

    test('when the address ranges run out the operation fails with NO_ADDRESS_SPACE; a deleted project frees its range', async () => {
      const p = await partnerWithModes(server, 'tight');
      await activeCustomer(server, p.live, 'one');
      const second = await partnerApi<{ data: { operation: { id: string } } }>(server, 'POST', '/customers/one/projects', {
        token: p.live,
        body: { name: 'two' },
      });
      assert.equal((await waitForOperation(server, p.live, 'one', second.body.data.operation.id)).status, 'succeeded');
      const third = await partnerApi<{ data: { operation: { id: string } } }>(server, 'POST', '/customers/one/projects', {
        token: p.live,
        body: { name: 'three' },
      });
      const failed = await waitForOperation(server, p.live, 'one', third.body.data.operation.id);
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error?.code, 'NO_ADDRESS_SPACE');
      const project = await partnerApi<{ data: ProjectBody }>(server, 'GET', '/customers/one/projects/three', { token: p.live });
      assert.equal(project.body.data.state, 'failed');
      const event = (await eventsOf(server, 'tight')).find((e) => e.type === 'project.failed');
      assert.deepEqual(event?.data.error, { code: 'NO_ADDRESS_SPACE', message: 'No network address range was left for the project.' });

      await partnerApi(server, 'DELETE', '/customers/one/projects/two', { token: p.live });
      await waitGone(server, p.live, '/customers/one/projects/two');
      await partnerApi(server, 'DELETE', '/customers/one/projects/three', { token: p.live });
      await waitGone(server, p.live, '/customers/one/projects/three');
      const retry = await partnerApi<{ data: { operation: { id: string } } }>(server, 'POST', '/customers/one/projects', {
        token: p.live,
        body: { name: 'three' },
      });
      assert.equal((await waitForOperation(server, p.live, 'one', retry.body.data.operation.id)).status, 'succeeded');
    });
  });
}
