import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runCli } from '../../test/cli-runner.ts';
import { assertError, operatorApi, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { activeCustomer, eventsOf, eventually, partnerWithModes, refreshTokens, type Tokens } from '../../test/provisioning.ts';
import type { Platform } from '../platform/platform.ts';

/**
 * The operator's side of provisioning (issue 14): the hold on a customer's resume, the operations a
 * platform keeps failing, and the customer prefixes that keep partners' platform names apart.
 */
for (const target of testDatabases()) {
  describe(`the operator and provisioning [${target.name}]`, () => {
    let server: TestServer;
    let p: Tokens;
    let teardownAnswers = true;
    let identityProviderAnswers = true;
    /** Runs while the platform stops or starts a customer's workloads: a change that lands between the read and the commit. */
    let meanwhile: (() => Promise<void>) | undefined;
    let cli: Record<string, string>;
    before(async () => {
      server = await startTestServer(target, {
        // A live platform whose teardown stops answering when told: the core retries and shows it.
        livePlatform: (sandbox) =>
          new Proxy(sandbox, {
            get(target, property, receiver) {
              if (property === 'deleteOrganization' && !teardownAnswers) {
                return async () => ({ state: 'unavailable', reason: 'the cluster API answered 503' });
              }
              if ((property === 'stopWorkloads' || property === 'startWorkloads') && meanwhile) {
                const change = meanwhile;
                meanwhile = undefined;
                const call = target[property].bind(target);
                return async (...args: Parameters<Platform['stopWorkloads']>) => {
                  await change();
                  return call(...args);
                };
              }
              if (property === 'ensureUser' && !identityProviderAnswers) {
                return async () => ({ state: 'unavailable', reason: 'the identity provider answered 502' });
              }
              const value = Reflect.get(target, property, receiver);
              return typeof value === 'function' ? value.bind(target) : value;
            },
          }) as Platform,
      });
      p = await partnerWithModes(server, 'operated');
      cli = { TENANTRY_OPERATOR_URL: server.operatorUrl, TENANTRY_OPERATOR_TOKEN: server.operatorToken, TENANTRY_ACTOR: 'ops' };
    });
    after(() => server.stop());

    test("a hold makes the partner's resume answer CONFLICT until it is released; both are audited", async () => {
      await activeCustomer(server, p.live, 'held');
      assert.equal((await partnerApi(server, 'POST', '/customers/held/suspend', { token: p.live, body: {} })).status, 200);
      const held = await runCli(['customers', 'hold', 'operated', 'held', '--reason', 'unpaid invoices', '--json'], cli);
      assert.equal(held.code, 0, held.stderr);
      assert.equal((JSON.parse(held.stdout) as { held: boolean }).held, true);
      const refused = assertError(await partnerApi(server, 'POST', '/customers/held/resume', { token: p.live, body: {} }), 409, 'CONFLICT');
      assert.equal(refused.details?.held, true);
      assert.equal(refused.details?.hold_reason, 'unpaid invoices');
      const released = await runCli(['customers', 'release', 'operated', 'held'], cli);
      assert.equal(released.code, 0, released.stderr);
      assert.equal((await partnerApi(server, 'POST', '/customers/held/resume', { token: p.live, body: {} })).status, 200);
      const audit = await operatorApi<{ data: { action: string; actor: string }[] }>(server, 'GET', '/audit?partner=operated');
      assert.deepEqual(
        audit.body.data.filter((e) => e.action.startsWith('customer.hold')).map((e) => [e.action, e.actor]),
        [
          ['customer.hold.release', 'operator:ops'],
          ['customer.hold', 'operator:ops'],
        ],
      );
      // The test-mode customer of the same id is another customer: it was never held.
      assertError(
        await operatorApi(server, 'PUT', '/partners/operated/customers/held/hold?mode=test', { body: { reason: 'x' } }),
        404,
        'NOT_FOUND',
      );
    });

    test('a hold placed while the platform starts the workloads wins: the resume answers CONFLICT and changes nothing', async () => {
      await activeCustomer(server, p.live, 'raced');
      assert.equal((await partnerApi(server, 'POST', '/customers/raced/suspend', { token: p.live, body: {} })).status, 200);
      meanwhile = async () => {
        const held = await operatorApi(server, 'PUT', '/partners/operated/customers/raced/hold', { body: { reason: 'fraud review' } });
        assert.equal(held.status, 200, held.text);
      };
      const refused = assertError(
        await partnerApi(server, 'POST', '/customers/raced/resume', { token: p.live, body: {} }),
        409,
        'CONFLICT',
      );
      assert.equal(meanwhile, undefined, 'the hold was placed between the read and the commit');
      assert.equal(refused.details?.held, true);
      const customer = await partnerApi<{ data: { status: string } }>(server, 'GET', '/customers/raced', { token: p.live });
      assert.equal(customer.body.data.status, 'suspended');
      const types = (await eventsOf(server, 'operated')).filter((e) => e.data.customer_id === 'raced').map((e) => e.type);
      assert.deepEqual(types, ['customer.ready', 'customer.suspended'], 'no customer.resumed for a resume that did not happen');
    });

    test('a deletion scheduled while the platform stops the workloads wins: the suspend answers CONFLICT and records nothing', async () => {
      await activeCustomer(server, p.live, 'raced-delete');
      meanwhile = async () => {
        const scheduled = await partnerApi(server, 'DELETE', '/customers/raced-delete?mode=scheduled', { token: p.live });
        assert.equal(scheduled.status, 202, scheduled.text);
      };
      const refused = assertError(
        await partnerApi(server, 'POST', '/customers/raced-delete/suspend', { token: p.live, body: {} }),
        409,
        'CONFLICT',
      );
      assert.equal(meanwhile, undefined, 'the deletion was scheduled between the read and the commit');
      assert.equal(refused.details?.status, 'deletion_scheduled');
      const types = (await eventsOf(server, 'operated')).filter((e) => e.data.customer_id === 'raced-delete').map((e) => e.type);
      assert.deepEqual(types, ['customer.ready', 'customer.deletion_scheduled']);
    });

    test('a teardown the platform keeps refusing is retried with backoff and listed as stuck for the operator', async () => {
      await activeCustomer(server, p.live, 'stubborn');
      teardownAnswers = false;
      const deleted = await partnerApi<{ data: { operation_id: string } }>(server, 'DELETE', '/customers/stubborn?mode=immediate', {
        token: p.live,
      });
      assert.equal(deleted.status, 202, deleted.text);
      // Each look that cannot move puts the next one off (1 s, 2 s, 4 s, ...): move the clock through them.
      for (let look = 0; look < 6; look++) {
        await server.services.engine.runDue();
        server.clock.advance(60_000);
      }
      const stuck = await runCli(['operations', 'stuck', '--json'], cli);
      assert.equal(stuck.code, 0, stuck.stderr);
      const rows = JSON.parse(stuck.stdout) as { id: string; failed_looks: number; last_problem: string; customer_id: string }[];
      const row = rows.find((r) => r.id === deleted.body.data.operation_id);
      assert.ok(row, stuck.stdout);
      assert.ok(row.failed_looks >= 5, `${row.failed_looks} failed looks`);
      assert.equal(row.last_problem, 'the cluster API answered 503');
      const op = await partnerApi<{ data: { status: string; error: unknown } }>(
        server,
        'GET',
        `/customers/stubborn/operations/${deleted.body.data.operation_id}`,
        { token: p.live },
      );
      assert.deepEqual([op.body.data.status, op.body.data.error], ['running', null], 'a teardown does not fail: it waits for the platform');
      const table = await runCli(['operations', 'stuck'], cli);
      assert.match(table.stdout, /customer\.delete.*stubborn.*the cluster API answered 503/);
      // The platform answers again: the teardown completes.
      teardownAnswers = true;
      server.clock.advance(10 * 60_000);
      await refreshTokens(server, p);
      await eventually(
        () => partnerApi(server, 'GET', '/customers/stubborn', { token: p.live }),
        (r) => r.status === 404,
      );
    });

    test('a user the identity provider does not take answers 503 UNAVAILABLE and leaves nothing; emails are unique per customer', async () => {
      await activeCustomer(server, p.live, 'people', { owner: { username: 'owner', email: 'owner@people.example' } });
      const addUser = (customer: string, username: string, email: string) =>
        partnerApi(server, 'POST', `/customers/${customer}/users`, { token: p.live, body: { username, email } });
      identityProviderAnswers = false;
      const refused = assertError(await addUser('people', 'eve', 'eve@people.example'), 503, 'UNAVAILABLE');
      assert.match(refused.message, /identity provider answered 502/);
      const users = await partnerApi<{ data: { username: string }[] }>(server, 'GET', '/customers/people/users', { token: p.live });
      assert.deepEqual(
        users.body.data.map((u) => u.username),
        ['owner'],
        'the refused user was taken back',
      );
      identityProviderAnswers = true;
      assert.equal((await addUser('people', 'eve', 'eve@people.example')).status, 201, 'the same create now succeeds');
      assertError(await addUser('people', 'eve2', 'EVE@people.example'), 409, 'ALREADY_EXISTS');
      // Another customer has its own realm: the same email is another person there.
      await activeCustomer(server, p.live, 'others', { owner: { username: 'owner', email: 'owner@others.example' } });
      assert.equal((await addUser('others', 'eve', 'eve@people.example')).status, 201);
    });

    test("customer prefixes keep partners' platform names apart", async () => {
      const create = (id: string, extra: Record<string, unknown> = {}) =>
        operatorApi<{ data: { customer_prefix: string } }>(server, 'POST', '/partners', { body: { id, display_name: id, ...extra } });
      assert.equal((await create('north')).body.data.customer_prefix, 'north');
      // `north-east` would extend `north` with a dash (`north` + `east-x` = `north-east` + `x`): the default avoids it.
      assert.equal((await create('north-east')).body.data.customer_prefix, 'northeast');
      const clash = assertError(await create('compass', { customer_prefix: 'north-x' }), 409, 'CONFLICT');
      assert.equal(clash.details?.field, 'customer_prefix');
      assertError(await create('southern', { customer_prefix: 'north' }), 409, 'CONFLICT');
      const long = await create('a-very-long-partner-identifier-x');
      assert.ok(long.body.data.customer_prefix.length <= 22, long.body.data.customer_prefix);
      const renamed = await operatorApi<{ data: { customer_prefix: string } }>(server, 'PATCH', '/partners/north', {
        body: { customer_prefix: 'nrth' },
      });
      assert.equal(renamed.body.data.customer_prefix, 'nrth', renamed.text);
      assertError(await operatorApi(server, 'PATCH', '/partners/north-east', { body: { customer_prefix: 'nrth' } }), 409, 'CONFLICT');
    });

    test("a suspended partner's 403 carries the rate-limit headers, like every authenticated answer", async () => {
      const suspended = await partnerWithModes(server, 'paused');
      assert.equal((await operatorApi(server, 'POST', '/partners/paused/suspend')).status, 200);
      const refused = await partnerApi(server, 'GET', '/auth/whoami', { token: suspended.live });
      assertError(refused, 403, 'FORBIDDEN');
      assert.ok(refused.headers.get('x-ratelimit-limit'));
      assert.ok(refused.headers.get('x-ratelimit-remaining'));
    });
  });
}
