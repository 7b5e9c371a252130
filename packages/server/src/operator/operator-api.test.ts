import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { assertError, createPartner, fieldErrors, http, issueKey, OPERATOR_API, operatorApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { buildOperatorApp } from './operator-app.ts';

interface AuditEntry {
  action: string;
  actor: string;
  partner_id: string | null;
  target: string;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  request_id: string;
}

for (const target of testDatabases()) {
  describe(`operator API [${target.name}]`, () => {
    let server: TestServer;
    const audit = async (partner: string) =>
      (await operatorApi<{ data: AuditEntry[] }>(server, 'GET', `/audit?partner=${partner}&limit=200`)).body.data;

    before(async () => {
      server = await startTestServer(target);
    });
    after(() => server.stop());

    test('every call needs the operator token', async () => {
      // Every route of the operator API as the server builds it: a route added later is covered too.
      const app = await buildOperatorApp(server.services, pino({ level: 'silent' }), server.operatorToken);
      await app.ready();
      const routes = app.routes.filter((route) => route.url.startsWith(`${OPERATOR_API}/`));
      await app.close();
      assert.ok(routes.length >= 15, `${routes.length} operator routes found`);
      for (const route of routes) {
        for (const method of [route.method].flat()) {
          if (method === 'HEAD') continue;
          // Parameters stand as any value: the token is checked before the route reads them.
          const path = route.url.replace(/:\w+/g, 'x');
          for (const token of [undefined, 'wrong-token-wrong-token-00']) {
            const result = await http(server.operatorUrl, method, path, token ? { token } : {});
            const error = assertError(result, 401, 'UNAUTHORIZED');
            // A wrong token is told apart from none: the caller has one, and it is not this server's.
            assert.equal(
              error.message,
              token
                ? "The operator token was refused: it is not this server's operator token."
                : 'Send the operator token as "Authorization: Bearer <token>".',
            );
          }
        }
      }
      // The operator API is not served on the partner listener.
      assertError(await http(server.partnerUrl, 'GET', `${OPERATOR_API}/partners`, { token: server.operatorToken }), 404, 'NOT_FOUND');
    });

    test('create applies defaults and settings; a second create answers 409 ALREADY_EXISTS and audits nothing', async () => {
      const partner = await createPartner(server, 'op-create', {
        scopes: ['customers:read'],
        limits: { max_customers: 5, rate_limit_per_minute: 60, rate_limit_burst: 10 },
        defaults: { grace_days: 1 },
        allow_private_webhooks: true,
      });
      assert.equal(partner.status, 'active');
      assert.deepEqual(partner.scopes, ['customers:read']);
      assert.deepEqual(partner.limits, {
        max_customers: 5,
        max_projects_per_customer: 10,
        max_open_operations: 20,
        max_usage_window_days: 93,
        rate_limit_per_minute: 60,
        rate_limit_burst: 10,
      });
      assert.deepEqual(partner.defaults, { plan_id: 'standard', grace_days: 1, project: 'default' });
      assert.equal(partner.allow_private_webhooks, true);
      const again = await operatorApi(server, 'POST', '/partners', { body: { id: 'op-create', display_name: 'Again' } });
      assertError(again, 409, 'ALREADY_EXISTS');
      const entries = await audit('op-create');
      assert.deepEqual(
        entries.map((e) => e.action),
        ['partner.create'],
      );
      assert.equal(entries[0]?.before, null);
      assert.equal(entries[0]?.after?.id, 'op-create');
      assert.equal(entries[0]?.actor, 'operator');
    });

    test('invalid partner requests name each field', async () => {
      const result = await operatorApi(server, 'POST', '/partners', {
        body: { id: 'Bad_ID', display_name: '', scopes: ['everything'], limits: { rate_limit_burst: 0 }, extra: 1 },
      });
      const fields = fieldErrors(assertError(result, 400, 'VALIDATION_ERROR'))
        .map((e) => e.field)
        .sort();
      assert.deepEqual(fields, ['display_name', 'extra', 'id', 'limits.rate_limit_burst', 'scopes.0']);
      assertError(await operatorApi(server, 'PATCH', '/partners/op-create', { body: {} }), 400, 'VALIDATION_ERROR');
      assertError(await operatorApi(server, 'GET', '/partners/no-such-partner'), 404, 'NOT_FOUND');
    });

    test('update, suspend and unsuspend are audited with before and after, and the actor header', async () => {
      await createPartner(server, 'op-change');
      const updated = await operatorApi<{ data: Record<string, unknown> }>(server, 'PATCH', '/partners/op-change', {
        body: { display_name: 'Renamed', limits: { max_customers: 0 } },
        headers: { 'x-tenantry-actor': 'alice' },
      });
      assert.equal(updated.status, 200, updated.text);
      assert.equal(updated.body.data.display_name, 'Renamed');
      const suspended = await operatorApi<{ data: { status: string; suspended_at: string } }>(
        server,
        'POST',
        '/partners/op-change/suspend',
      );
      assert.equal(suspended.body.data.status, 'suspended');
      assert.ok(suspended.body.data.suspended_at);
      // Suspending twice changes nothing and audits nothing.
      assert.equal((await operatorApi(server, 'POST', '/partners/op-change/suspend')).status, 200);
      const resumed = await operatorApi<{ data: { status: string; suspended_at: null } }>(server, 'POST', '/partners/op-change/unsuspend');
      assert.equal(resumed.body.data.status, 'active');
      assert.equal(resumed.body.data.suspended_at, null);
      const entries = await audit('op-change');
      assert.deepEqual(
        entries.map((e) => e.action),
        ['partner.unsuspend', 'partner.suspend', 'partner.update', 'partner.create'],
      );
      const update = entries[2];
      assert.equal(update?.actor, 'operator:alice');
      assert.equal(update?.before?.display_name, 'Partner op-change');
      assert.equal(update?.after?.display_name, 'Renamed');
      assert.deepEqual(update?.after?.limits, { ...(update?.before?.limits as object), max_customers: 0 });
      assert.equal(entries[1]?.before?.status, 'active');
      assert.equal(entries[1]?.after?.status, 'suspended');
      assert.match(entries[0]?.request_id ?? '', /^req_/);
    });

    test('a key is shown once; only its hash is stored; list and audit never show a secret', async () => {
      await createPartner(server, 'op-keys');
      const key = await issueKey(server, 'op-keys', {
        mode: 'test',
        allow_cidrs: ['10.0.0.1', '10.1.0.0/16'],
        expires_at: '2099-01-01T00:00:00Z',
      });
      const secret = key.split('_')[4] ?? '';
      const kid = key.split('_')[3] ?? '';
      const listed = await operatorApi<{ data: Record<string, unknown>[] }>(server, 'GET', '/partners/op-keys/keys');
      assert.equal(listed.body.data.length, 1);
      assert.deepEqual(
        { ...listed.body.data[0], created_at: undefined },
        {
          kid,
          partner_id: 'op-keys',
          mode: 'test',
          status: 'active',
          allow_cidrs: ['10.0.0.1/32', '10.1.0.0/16'],
          expires_at: '2099-01-01T00:00:00.000Z',
          created_at: undefined,
          revoked_at: null,
          last_used_at: null,
        },
      );
      assert.ok(!listed.text.includes(secret));
      const auditText = JSON.stringify(await audit('op-keys'));
      assert.ok(!auditText.includes(secret), 'no secret in the audit log');
      const stored = await server.database.db.selectFrom('api_keys').selectAll().where('kid', '=', kid).executeTakeFirstOrThrow();
      assert.ok(!JSON.stringify(stored).includes(secret), 'only a hash is stored');
      assert.match(stored.secret_hash, /^[0-9a-f]{64}$/);
    });

    test('key requests are validated: CIDRs, past expiry, unknown partner; revoke twice answers 409 CONFLICT', async () => {
      await createPartner(server, 'op-keys-bad');
      const bad = await operatorApi(server, 'POST', '/partners/op-keys-bad/keys', {
        body: { allow_cidrs: ['10.0.0.0/33', 'nonsense'], expires_at: '2001-01-01T00:00:00Z' },
      });
      const fields = fieldErrors(assertError(bad, 400, 'VALIDATION_ERROR'))
        .map((e) => e.field)
        .sort();
      assert.deepEqual(fields, ['allow_cidrs.0', 'allow_cidrs.1', 'expires_at']);
      assertError(await operatorApi(server, 'POST', '/partners/nobody-here/keys', { body: {} }), 404, 'NOT_FOUND');
      const kid = (await issueKey(server, 'op-keys-bad')).split('_')[3];
      const revoked = await operatorApi<{ data: { status: string } }>(server, 'POST', `/partners/op-keys-bad/keys/${kid}/revoke`);
      assert.equal(revoked.body.data.status, 'revoked');
      assertError(await operatorApi(server, 'POST', `/partners/op-keys-bad/keys/${kid}/revoke`), 409, 'CONFLICT');
      assertError(await operatorApi(server, 'POST', '/partners/op-keys-bad/keys/aaaaaaaaaaaa/revoke'), 404, 'NOT_FOUND');
      const actions = (await audit('op-keys-bad')).map((e) => e.action);
      assert.deepEqual(actions, ['key.revoke', 'key.issue', 'partner.create']);
    });

    test('partner and audit lists page with cursors, newest audit entry first', async () => {
      for (const id of ['op-page-a', 'op-page-b', 'op-page-c']) await createPartner(server, id);
      const first = await operatorApi<{ data: { id: string }[]; pagination: { next_cursor: string } }>(server, 'GET', '/partners?limit=2');
      assert.equal(first.body.data.length, 2);
      const ids = first.body.data.map((p) => p.id);
      let cursor: string | null = first.body.pagination.next_cursor;
      while (cursor) {
        const next: { body: { data: { id: string }[]; pagination: { next_cursor: string | null } } } = await operatorApi(
          server,
          'GET',
          `/partners?limit=2&cursor=${encodeURIComponent(cursor)}`,
        );
        ids.push(...next.body.data.map((p) => p.id));
        cursor = next.body.pagination.next_cursor;
      }
      assert.deepEqual(ids, [...ids].sort());
      assert.ok(ids.includes('op-page-c'));
      const auditPage = await operatorApi<{ data: { id: string }[] }>(server, 'GET', '/audit?limit=200');
      const auditIds = auditPage.body.data.map((e) => e.id);
      assert.deepEqual(auditIds, [...auditIds].sort().reverse());
      const wrongList = await operatorApi(server, 'GET', `/audit?cursor=${encodeURIComponent(first.body.pagination.next_cursor)}`);
      assertError(wrongList, 400, 'VALIDATION_ERROR');
    });
  });
}
