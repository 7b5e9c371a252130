import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertError, fieldErrors } from '../../test/client.ts';
import { type TestServer, testDatabases } from '../../test/harness.ts';
import { refreshTokens, type Tokens } from '../../test/provisioning.ts';
import { type Config, dns, useWebhookWorld } from '../../test/webhook-fixture.ts';
import type { WebhookReceiver } from '../../test/webhook-receiver.ts';
import { EVENT_TYPES } from '../events/payloads.ts';

for (const target of testDatabases()) {
  describe(`webhooks: configuration [${target.name}]`, () => {
    let server: TestServer;
    let receiver: WebhookReceiver;
    let lab: Tokens;
    let plain: Tokens;
    const { api, configure } = useWebhookWorld(target, (world) => {
      ({ server, receiver, lab, plain } = world);
    });

    test('the PUT that creates the receiver returns the 64-hex secret once; later PUTs and GET never do', async () => {
      await api(lab.live, 'DELETE', '/webhook');
      const created = await api<{ data: Config }>(lab.live, 'PUT', '/webhook', { url: receiver.url() });
      assert.equal(created.status, 200, created.text);
      assert.equal(created.headers.get('cache-control'), 'no-store');
      assert.match(created.body.data.signing_secret ?? '', /^[0-9a-f]{64}$/);
      assert.equal(created.body.data.signing_secret_configured, true);
      assert.deepEqual(created.body.data.events, ['*'], 'default filter');
      assert.equal(created.body.data.enabled, true, 'enabled by default');

      const again = await configure(lab.live, { url: receiver.url('/other'), events: ['customer.*'], enabled: false });
      assert.equal(again.signing_secret, undefined);
      assert.equal(again.signing_secret_configured, true);
      assert.deepEqual([again.url, again.events, again.enabled], [receiver.url('/other'), ['customer.*'], false]);

      const read = await api<{ data: Config }>(lab.live, 'GET', '/webhook');
      assert.equal(read.status, 200);
      assert.equal(read.body.data.signing_secret, undefined);
      assert.doesNotMatch(read.text, new RegExp(created.body.data.signing_secret ?? 'x'));
      assert.equal(read.body.data.url, receiver.url('/other'));
    });

    test('an idempotent replay of the creating PUT carries the secret for 24 hours, then the key is new again', async () => {
      await api(lab.live, 'DELETE', '/webhook');
      const key = { 'idempotency-key': `create-${target.name}` };
      const body = { url: receiver.url() };
      const first = await api<{ data: Config }>(lab.live, 'PUT', '/webhook', body, key);
      const replay = await api<{ data: Config }>(lab.live, 'PUT', '/webhook', body, key);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal(replay.body.data.signing_secret, first.body.data.signing_secret);
      assert.match(replay.body.data.signing_secret ?? '', /^[0-9a-f]{64}$/);
      server.clock.advance(24 * 3600 * 1000 + 1000);
      await refreshTokens(server, lab);
      const later = await api<{ data: Config }>(lab.live, 'PUT', '/webhook', body, key);
      assert.equal(later.status, 200);
      assert.equal(later.headers.get('idempotent-replayed'), null);
      assert.equal(later.body.data.signing_secret, undefined, 'the secret exists: a fresh PUT does not return it');
    });

    test('URL and filter problems answer 400 VALIDATION_ERROR naming each field; unknown events list the known ones', async () => {
      const cases: [Record<string, unknown>, string, RegExp][] = [
        [{ url: 'http://receiver.test/hooks' }, 'url', /https/],
        [{ url: 'https://user:pw@receiver.test/hooks' }, 'url', /credentials/],
        [{ url: 'https://receiver.test/hooks#frag' }, 'url', /fragment/],
        [{ url: 'not a url' }, 'url', /absolute URL/],
        [{ url: 'ftp://receiver.test/' }, 'url', /https/],
        [{ url: 'https://nowhere.test/hooks' }, 'url', /does not resolve to a public address/],
      ];
      for (const [body, field, message] of cases) {
        const error = assertError(await api(plain.live, 'PUT', '/webhook', body), 400, 'VALIDATION_ERROR');
        const [problem] = fieldErrors(error);
        assert.equal(problem?.field, field, JSON.stringify(body));
        assert.match(problem?.message ?? '', message, JSON.stringify(error));
      }
      const unknown = assertError(
        await api(lab.live, 'PUT', '/webhook', {
          url: receiver.url(),
          events: ['customer.ready', 'customer.exploded', 'ping', 'quota.*'],
        }),
        400,
        'VALIDATION_ERROR',
      );
      assert.deepEqual(
        fieldErrors(unknown).map((p) => p.field),
        ['events.1', 'events.2', 'events.3'],
      );
      assert.match(fieldErrors(unknown)[1]?.message ?? '', /ping cannot be named/);
      const known = unknown.details?.known_events as string[];
      assert.ok(known.includes('*') && known.includes('customer.*') && known.includes('project.*'));
      for (const name of EVENT_TYPES) assert.ok(known.includes(name), name);
      assert.ok(!known.includes('ping'));
      assertError(await api(lab.live, 'PUT', '/webhook', { url: receiver.url(), extra: 1 }), 400, 'VALIDATION_ERROR');
      assertError(await api(lab.live, 'PUT', '/webhook', { events: ['*'] }), 400, 'VALIDATION_ERROR');
      // An empty list is valid and means every event.
      assert.deepEqual((await configure(lab.live, { url: receiver.url(), events: [] })).events, []);
    });

    test('at least 50 private, local and special-purpose destinations are refused, whatever their spelling', async () => {
      dns.set('internal.example', ['10.1.2.3']);
      dns.set('mixed.example', ['93.184.216.34', '192.168.1.1']);
      dns.set('metadata.example', ['169.254.169.254']);
      dns.set('v6local.example', ['fd00::1']);
      dns.set('mapped.example', ['::ffff:127.0.0.1']);
      const refused = [
        'https://127.0.0.1/',
        'https://127.1/',
        'https://127.255.255.254/',
        'https://2130706433/',
        'https://0x7f000001/',
        'https://0177.0.0.1/',
        'https://0x7f.0.0.1/',
        'https://017700000001/',
        'https://10.0.0.1/',
        'https://10.255.255.255/',
        'https://167772161/',
        'https://172.16.0.1/',
        'https://172.31.255.1/',
        'https://192.168.0.1/',
        'https://0xc0a80001/',
        'https://169.254.169.254/latest/meta-data/',
        'https://169.254.0.1/',
        'https://2852039166/',
        'https://100.64.0.1/',
        'https://100.127.255.254/',
        'https://0.0.0.0/',
        'https://0/',
        'https://0.1.2.3/',
        'https://224.0.0.1/',
        'https://239.255.255.250/',
        'https://255.255.255.255/',
        'https://240.0.0.1/',
        'https://192.0.2.1/',
        'https://198.51.100.7/',
        'https://203.0.113.9/',
        'https://198.18.0.1/',
        'https://192.0.0.8/',
        'https://[::1]/',
        'https://[::]/',
        'https://[0:0:0:0:0:0:0:1]/',
        'https://[::ffff:127.0.0.1]/',
        'https://[::ffff:7f00:1]/',
        'https://[::ffff:10.0.0.1]/',
        'https://[::ffff:169.254.169.254]/',
        'https://[::127.0.0.1]/',
        'https://[fe80::1]/',
        'https://[febf::1]/',
        'https://[fc00::1]/',
        'https://[fd12:3456::1]/',
        'https://[ff02::1]/',
        'https://[64:ff9b::a00:1]/',
        'https://[2002:7f00:1::]/',
        'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
        'https://[2001:db8::1]/',
        'https://[fec0::1]/',
        'https://localhost/',
        'https://LOCALHOST./',
        'https://api.localhost/',
        'https://internal.example/',
        'https://mixed.example/',
        'https://metadata.example/',
        'https://v6local.example/',
        'https://mapped.example/',
      ];
      assert.ok(refused.length >= 50);
      for (const url of refused) {
        const error = assertError(await api(plain.live, 'PUT', '/webhook', { url }), 400, 'VALIDATION_ERROR');
        const [problem] = fieldErrors(error);
        assert.equal(problem?.field, 'url', url);
        assert.match(problem?.message ?? '', /does not resolve to a public address|port \d+ is not allowed/, `${url}: ${problem?.message}`);
        // Each refusal says what to do about it, and never what a name resolved to.
        assert.match(
          problem?.message ?? '',
          /tenantry partners update <partner-id> --allow-private-webhooks.*TENANTRY_WEBHOOK_CA_FILE/,
          url,
        );
        const host = new URL(url).hostname;
        if (!/^[\d.]+$|^\[/.test(host))
          assert.doesNotMatch(problem?.message ?? '', /\d+\.\d+\.\d+\.\d+|[0-9a-f]*::|resolves to/i, `${url}: ${problem?.message}`);
      }
      assertError(await api(plain.live, 'GET', '/webhook'), 404, 'NOT_FOUND');
      // A public destination is accepted.
      dns.set('hooks.partner.example', ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946']);
      assert.equal((await api(plain.live, 'PUT', '/webhook', { url: 'https://hooks.partner.example/tenantry' })).status, 200);
      assert.equal((await api(plain.live, 'PUT', '/webhook', { url: 'https://8.8.8.8:443/hooks?x=1' })).status, 200);
      // Another port needs the operator's allowance, like a private address (or deliveries would scan ports).
      for (const url of ['https://8.8.8.8:8443/hooks', 'https://hooks.partner.example:22/', 'https://127.0.0.1:8443/hooks']) {
        const [problem] = fieldErrors(assertError(await api(plain.live, 'PUT', '/webhook', { url }), 400, 'VALIDATION_ERROR'));
        assert.match(problem?.message ?? '', /port \d+ is not allowed/, url);
      }
      await api(plain.live, 'DELETE', '/webhook');
    });

    test('cloud metadata and host-service addresses are refused even for a partner allowed private receivers', async () => {
      dns.set('metadata.example', ['169.254.169.254']);
      dns.set('wireserver.example', ['168.63.129.16']);
      dns.set('imds6.example', ['2600:1f18::1', 'fd00:ec2::254']);
      const refused = [
        'https://metadata.example/',
        'https://169.254.169.254/latest/meta-data/',
        'https://169.254.170.2/v2/credentials',
        'https://[::ffff:169.254.169.254]/',
        'https://[fe80::a9fe:a9fe]/',
        'https://168.63.129.16/',
        'https://wireserver.example/',
        'https://100.100.100.200/',
        'https://[fd00:ec2::254]/',
        'https://imds6.example/',
      ];
      for (const url of refused) {
        const [problem] = fieldErrors(assertError(await api(lab.live, 'PUT', '/webhook', { url }), 400, 'VALIDATION_ERROR'));
        assert.equal(problem?.field, 'url', url);
      }
      // The allowance still covers ordinary private addresses and other ports.
      assert.equal((await api(lab.live, 'PUT', '/webhook', { url: receiver.url() })).status, 200);
      await api(lab.live, 'DELETE', '/webhook');
    });

    test('DELETE removes the configuration and its secret; test and rotation then answer NOT_CONFIGURED', async () => {
      await configure(lab.live, { url: receiver.url() });
      const removed = await api<{ data: { deleted: boolean } }>(lab.live, 'DELETE', '/webhook');
      assert.equal(removed.status, 200);
      assert.deepEqual(removed.body.data, { deleted: true });
      assertError(await api(lab.live, 'GET', '/webhook'), 404, 'NOT_FOUND');
      assertError(await api(lab.live, 'DELETE', '/webhook'), 404, 'NOT_FOUND');
      assertError(await api(lab.live, 'POST', '/webhook/test'), 400, 'NOT_CONFIGURED');
      assertError(await api(lab.live, 'POST', '/webhook/secret'), 400, 'NOT_CONFIGURED');
    });

    test('live and test mode have separate receivers', async () => {
      await api(lab.live, 'DELETE', '/webhook');
      await api(lab.test, 'DELETE', '/webhook');
      await configure(lab.test, { url: receiver.url('/test-mode') });
      assertError(await api(lab.live, 'GET', '/webhook'), 404, 'NOT_FOUND');
      assert.equal((await api<{ data: Config }>(lab.test, 'GET', '/webhook')).body.data.url, receiver.url('/test-mode'));
      await api(lab.test, 'DELETE', '/webhook');
    });
  });
}
