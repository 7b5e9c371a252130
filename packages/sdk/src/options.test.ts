import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { type ClientOptions, Tenantry, VERSION } from './index.ts';
import { scriptedServer } from './testing/scripted-server.ts';

const packageJson = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

describe('the constructor says what is wrong', () => {
  const cases: [string, unknown, RegExp][] = [
    ['no options', undefined, /^new Tenantry\(\): missing apiKey \(.*\) and baseUrl \(.*\)$/],
    [
      'an unset environment variable as the key',
      { apiKey: undefined, baseUrl: 'https://api.example.com' },
      /missing apiKey \(the tnt_live_/,
    ],
    ['an empty key', { apiKey: '', baseUrl: 'https://api.example.com' }, /missing apiKey/],
    [
      'no baseUrl',
      { apiKey: 'tnt_live_x' },
      /^new Tenantry\(\): missing baseUrl \(the service origin, e\.g\. https:\/\/api\.example\.com\)$/,
    ],
    [
      'a baseUrl without a scheme',
      { apiKey: 'tnt_live_x', baseUrl: 'api.example.com' },
      /baseUrl must be an http:\/\/ or https:\/\/ URL, got "api\.example\.com"/,
    ],
    [
      'a baseUrl of another scheme',
      { apiKey: 'tnt_live_x', baseUrl: 'ftp://api.example.com' },
      /baseUrl must be an http:\/\/ or https:\/\/ URL/,
    ],
    [
      'a timeout of 0',
      { apiKey: 'tnt_live_x', baseUrl: 'https://a.example', timeout: 0 },
      /timeout must be a positive number of milliseconds, got 0/,
    ],
    ['negative retries', { apiKey: 'tnt_live_x', baseUrl: 'https://a.example', maxRetries: -1 }, /maxRetries must be a whole number/],
    ['a cap that is not a number', { apiKey: 'tnt_live_x', baseUrl: 'https://a.example', maxRetryAfter: '60' }, /maxRetryAfter must be/],
  ];
  for (const [name, options, message] of cases) {
    test(name, () => {
      assert.throws(
        () => new Tenantry(options as ClientOptions),
        (error) => error instanceof TypeError && message.test(error.message),
      );
    });
  }

  test('the key never appears in a message', () => {
    const error = (() => {
      try {
        return new Tenantry({ apiKey: 'tnt_live_secret', baseUrl: 'nope' });
      } catch (caught) {
        return caught as Error;
      }
    })();
    assert.ok(error instanceof TypeError);
    assert.doesNotMatch(error.message, /secret/);
  });

  test('a bad per-call timeout rejects the call before sending it', async () => {
    const client = new Tenantry({ apiKey: 'tnt_live_x', baseUrl: 'http://127.0.0.1:9' });
    await assert.rejects(client.customers.get('x', { timeout: -5 }), /timeout must be a positive number of milliseconds, got -5/);
  });
});

describe('what each request says about the SDK, and what each answer leaves behind', () => {
  test('User-Agent is tenantry-sdk/<package version> node/<Node version>, on the exchange and on calls', async (t) => {
    const server = await scriptedServer([]);
    t.after(() => server.stop());
    await new Tenantry({ apiKey: 'tnt_live_x', baseUrl: server.baseUrl }).auth.whoami();
    const expected = `tenantry-sdk/${packageJson.version} node/${process.versions.node}`;
    assert.equal(VERSION, packageJson.version, 'src/version.ts follows package.json');
    assert.equal(server.exchanges[0]?.headers['user-agent'], expected);
    assert.equal(server.seen[0]?.headers['user-agent'], expected);
  });

  test('lastResponse: the request id, status and headers of the answer, out of the JSON', async (t) => {
    const server = await scriptedServer([]);
    t.after(() => server.stop());
    const client = new Tenantry({ apiKey: 'tnt_live_x', baseUrl: server.baseUrl });
    const customer = await client.customers.get('globex');
    // The exchange answered req_1; the call is the second answer.
    assert.equal(customer.lastResponse.requestId, 'req_2');
    assert.equal(customer.lastResponse.statusCode, 200);
    assert.equal(customer.lastResponse.headers.get('content-type'), 'application/json');
    assert.equal(JSON.stringify(customer), '{"ok":true}');
    assert.deepEqual(Object.keys(customer), ['ok']);

    const created = await client.customers.create(
      { id: 'g', owner: { username: 'o', email: 'o@g.example' } },
      { idempotencyKey: 'order-7' },
    );
    assert.equal(created.lastResponse.requestId, 'req_3');
    assert.equal(created.lastResponse.idempotencyKey, 'order-7');
    assert.equal(server.seen[1]?.headers['idempotency-key'], 'order-7');

    const page = await client.customers.list({ limit: 1 }).page();
    assert.equal(page.lastResponse.requestId, 'req_4');
  });
});
