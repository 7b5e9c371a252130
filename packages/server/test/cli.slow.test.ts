import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runCli } from './cli-runner.ts';
import { exchange } from './client.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';

// The CLI is a client of the operator API: one database is enough to test it.
const target = testDatabases()[0];
if (target) {
  describe('tenantry CLI', () => {
    let server: TestServer;
    let env: Record<string, string>;
    const cli = (...args: string[]) => runCli(args, env);
    const json = async <T>(...args: string[]): Promise<T> => {
      const result = await cli(...args, '--json');
      assert.equal(result.code, 0, result.stderr);
      return JSON.parse(result.stdout) as T;
    };

    before(async () => {
      server = await startTestServer(target);
      env = { TENANTRY_OPERATOR_URL: server.operatorUrl, TENANTRY_OPERATOR_TOKEN: server.operatorToken, TENANTRY_ACTOR: 'cli-test' };
    });
    after(() => server.stop());

    test('partners create with every flag; show; list as a table and as JSON', async () => {
      const created = await json<Record<string, unknown>>(
        'partners',
        'create',
        'cli-acme',
        '--name',
        'Acme Cloud',
        '--scopes',
        'customers:read,customers:write',
        '--max-customers',
        '12',
        '--max-projects',
        '3',
        '--max-open-operations',
        '4',
        '--usage-window-days',
        '31',
        '--rate-limit',
        '600/60',
        '--allow-private-webhooks',
        '--default-plan',
        'gpu-small',
        '--grace-days',
        '2',
      );
      assert.equal(created.id, 'cli-acme');
      assert.equal(created.status, 'active');
      assert.deepEqual(created.scopes, ['customers:read', 'customers:write']);
      assert.deepEqual(created.limits, {
        max_customers: 12,
        max_projects_per_customer: 3,
        max_open_operations: 4,
        max_usage_window_days: 31,
        rate_limit_per_minute: 600,
        rate_limit_burst: 60,
      });
      assert.deepEqual(created.defaults, { plan_id: 'gpu-small', grace_days: 2, project: 'default' });
      assert.equal(created.allow_private_webhooks, true);

      const table = await cli('partners', 'list');
      assert.equal(table.code, 0, table.stderr);
      assert.match(table.stdout, /ID\s+│\s+NAME/);
      assert.match(table.stdout, /cli-acme\s+│\s+Acme Cloud\s+│\s+active/);
      const listed = await json<{ id: string }[]>('partners', 'list');
      assert.ok(listed.some((p) => p.id === 'cli-acme'));
      const shown = await cli('partners', 'show', 'cli-acme');
      assert.match(shown.stdout, /limits\.rate_limit_per_minute\s+│\s+600/);
    });

    test('partners update, suspend and unsuspend; audit shows them with the actor', async () => {
      await json('partners', 'create', 'cli-change', '--name', 'Before');
      const updated = await json<Record<string, unknown>>(
        'partners',
        'update',
        'cli-change',
        '--name',
        'After',
        '--no-allow-private-webhooks',
      );
      assert.equal(updated.display_name, 'After');
      assert.equal(updated.allow_private_webhooks, false);
      assert.equal((await json<{ status: string }>('partners', 'suspend', 'cli-change')).status, 'suspended');
      assert.equal((await json<{ status: string }>('partners', 'unsuspend', 'cli-change')).status, 'active');
      const entries = await json<{ action: string; actor: string }[]>('audit', '--partner', 'cli-change');
      assert.deepEqual(
        entries.map((e) => e.action),
        ['partner.unsuspend', 'partner.suspend', 'partner.update', 'partner.create'],
      );
      assert.ok(entries.every((e) => e.actor === 'operator:cli-test'));
      const limited = await json<unknown[]>('audit', '--limit', '2');
      assert.equal(limited.length, 2);
      const table = await cli('audit', '--partner', 'cli-change');
      assert.match(table.stdout, /partner\.suspend/);
    });

    test('keys issue prints the key once (JSON: key, kid, mode, expires_at, allow_cidrs); list never prints it; revoke', async () => {
      await json('partners', 'create', 'cli-keys', '--name', 'Keys');
      const issued = await json<Record<string, unknown>>(
        'keys',
        'issue',
        'cli-keys',
        '--test',
        '--expires-at',
        '2099-05-01T00:00:00Z',
        '--allow-cidr',
        '127.0.0.1',
        '--allow-cidr',
        '::1',
      );
      assert.deepEqual(Object.keys(issued).sort(), ['allow_cidrs', 'expires_at', 'key', 'kid', 'mode']);
      assert.equal(issued.mode, 'test');
      assert.deepEqual(issued.allow_cidrs, ['127.0.0.1/32', '::1/128']);
      const key = String(issued.key);
      assert.equal((await exchange(server, key)).status, 200, 'the printed key works');

      const human = await cli('keys', 'issue', 'cli-keys');
      assert.equal(human.code, 0);
      assert.match(human.stdout, /tnt_live_cli-keys_/);
      assert.match(human.stderr, /only time the key is shown/);

      const listText = await cli('keys', 'list', 'cli-keys');
      assert.match(listText.stdout, new RegExp(String(issued.kid)));
      assert.ok(!listText.stdout.includes(key.split('_')[4] ?? '-'));
      const revoked = await json<{ status: string }>('keys', 'revoke', 'cli-keys', String(issued.kid));
      assert.equal(revoked.status, 'revoked');
      assert.equal((await exchange(server, key)).status, 401);
    });

    test('plans list|set, partners plans, capacity show|set and gpu-profiles set: tables by default, JSON with --json', async () => {
      const table = await cli('plans', 'list');
      assert.equal(table.code, 0, table.stderr);
      assert.match(table.stdout, /ID\s+│\s+NAME\s+│\s+VCPU/);
      assert.match(table.stdout, /standard\s+│\s+Standard\s+│\s+2\s+│\s+8\s+│\s+50\s+│\s+-/);

      const plan = await json<{ id: string; quota: Record<string, unknown> }>(
        'plans',
        'set',
        'cli-gpu',
        '--name',
        'CLI GPU',
        '--vcpu',
        '8',
        '--memory-gib',
        '32',
        '--storage-gib',
        '100',
        '--gpu',
        'l4-24gb=1',
      );
      assert.deepEqual(plan.quota, { vcpu: 8, memory_gib: 32, storage_gib: 100, gpus: { 'l4-24gb': 1 } });
      assert.ok((await json<{ id: string }[]>('plans', 'list')).some((p) => p.id === 'cli-gpu'));

      await json('partners', 'create', 'cli-cap', '--name', 'Capacity Co');
      const plans = await json<{ plans: string[] }>('partners', 'plans', 'cli-cap', 'standard', 'cli-gpu');
      assert.deepEqual(plans.plans, ['cli-gpu', 'standard']);
      const profiles = await json<{ gpu_profiles: string[] }>('gpu-profiles', 'set', 'cli-cap', 'l4-24gb');
      assert.deepEqual(profiles.gpu_profiles, ['l4-24gb']);
      const set = await json<{ pool: { vcpu: number; gpus: Record<string, number> }; per_customer_max: { vcpu: number } }>(
        'capacity',
        'set',
        'cli-cap',
        '--vcpu',
        '120',
        '--gpu',
        'l4-24gb=3',
        '--per-customer-vcpu',
        '16',
      );
      assert.equal(set.pool.vcpu, 120);
      assert.equal(set.pool.gpus['l4-24gb'], 3);
      assert.equal(set.per_customer_max.vcpu, 16);

      const shown = await cli('capacity', 'show', 'cli-cap');
      assert.equal(shown.code, 0, shown.stderr);
      assert.match(shown.stdout, /DIMENSION\s+│\s+POOL\s+│\s+ALLOCATED LIVE\s+│\s+ALLOCATED TEST\s+│\s+PER CUSTOMER/);
      assert.match(shown.stdout, /vcpu\s+│\s+120\s+│\s+0\s+│\s+0\s+│\s+16/);
      assert.match(shown.stdout, /gpus\.l4-24gb\s+│\s+3\s+│/);
      assert.match(shown.stdout, /plans: cli-gpu, standard/);

      const audit = await json<{ action: string; target: string }[]>('audit', '--limit', '10');
      for (const action of ['plan.set', 'partner.plans', 'partner.gpu_profiles', 'partner.capacity']) {
        assert.ok(
          audit.some((entry) => entry.action === action),
          `audited ${action}`,
        );
      }

      const nothing = await cli('capacity', 'set', 'cli-cap');
      assert.equal(nothing.code, 2);
      assert.match(nothing.stderr, /nothing to change/);
      const badGpu = await cli('plans', 'set', 'x', '--name', 'x', '--vcpu', '1', '--memory-gib', '1', '--storage-gib', '1', '--gpu', 'l4');
      assert.equal(badGpu.code, 2);
      assert.match(badGpu.stderr, /--gpu must be PROFILE=N/);
      const unknownPlan = await cli('partners', 'plans', 'cli-cap', 'no-such-plan');
      assert.equal(unknownPlan.code, 1);
      assert.match(unknownPlan.stderr, /VALIDATION_ERROR|NOT_FOUND/);
    });

    test('errors are one clear line on stderr and a non-zero exit', async () => {
      const missing = await cli('partners', 'show', 'no-such-partner');
      assert.equal(missing.code, 1);
      assert.equal(missing.stderr.trim().split('\n').length, 1);
      assert.match(missing.stderr, /^tenantry: NOT_FOUND: Partner no-such-partner does not exist\.\n$/);

      // A value the server refuses is named by the argument or flag that gave it, as a refused command line.
      const invalid = await cli('partners', 'create', 'Bad_Id', '--name', 'x');
      assert.equal(invalid.code, 2);
      assert.match(invalid.stderr, /^tenantry: <id> must match pattern .*, for example acme\n$/);

      const badFlag = await cli('partners', 'create', 'cli-x', '--name', 'x', '--rate-limit', 'fast');
      assert.equal(badFlag.code, 2);
      assert.match(badFlag.stderr, /--rate-limit must be PER_MIN\/BURST/);

      const down = await runCli(['partners', 'list'], {
        TENANTRY_OPERATOR_URL: 'http://127.0.0.1:9',
        TENANTRY_OPERATOR_TOKEN: 'x'.repeat(30),
      });
      assert.equal(down.code, 1);
      assert.match(down.stderr, /^tenantry: cannot reach the operator API at http:\/\/127\.0\.0\.1:9/);

      const wrongToken = await runCli(['partners', 'list'], {
        TENANTRY_OPERATOR_URL: server.operatorUrl,
        TENANTRY_OPERATOR_TOKEN: 'y'.repeat(30),
      });
      assert.equal(wrongToken.code, 1);
      assert.match(
        wrongToken.stderr,
        /^tenantry: the operator token was refused by http:\/\/127\.0\.0\.1:\d+: the token in TENANTRY_OPERATOR_TOKEN is not that server's/,
      );
    });
  });
}
