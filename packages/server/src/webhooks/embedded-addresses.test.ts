import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, fieldErrors, partnerApi } from '../../test/client.ts';
import { startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { partnerWithModes, type Tokens } from '../../test/provisioning.ts';
import { tableResolver } from '../../test/webhook-receiver.ts';

/** Host names the test resolver answers; anything else does not resolve. */
const { dns, resolver } = tableResolver();

/**
 * The metadata address 169.254.169.254 (a9fe:a9fe), and other host-service addresses, carried inside
 * an IPv6 address in every way IPv6 carries an IPv4 address to an IPv4 host.
 */
const HOST_SERVICE_SPELLINGS: Record<string, string> = {
  'IPv4-mapped': '::ffff:a9fe:a9fe',
  'IPv4-translated': '::ffff:0:a9fe:a9fe',
  'IPv4-compatible': '::a9fe:a9fe',
  'IPv4-compatible, ECS task credentials': '::a9fe:aa02',
  NAT64: '64:ff9b::a9fe:a9fe',
  'NAT64, Alibaba Cloud metadata': '64:ff9b::6464:64c8',
  'local-use NAT64, /96': '64:ff9b:1::a9fe:a9fe',
  'local-use NAT64, /64': '64:ff9b:1:0:a9:fea9:fe00:0',
  'local-use NAT64, /56': '64:ff9b:1:a9:fe:a9fe::',
  'local-use NAT64, /48': '64:ff9b:1:a9fe:a9:fe00::',
  '6to4': '2002:a9fe:a9fe::',
  '6to4, a host behind it': '2002:a9fe:a9fe:1::1',
  '6to4, Azure WireServer': '2002:a83f:8110::',
  'Teredo server': '2001:0:a9fe:a9fe::1',
  'Teredo client (inverted)': '2001:0:4136:e378:8000:63bf:5601:5601',
};

/** The private address 10.0.0.1 (a00:1) carried the same ways. */
const PRIVATE_SPELLINGS: Record<string, string> = {
  'IPv4-mapped': '::ffff:a00:1',
  'IPv4-translated': '::ffff:0:a00:1',
  'IPv4-compatible': '::a00:1',
  NAT64: '64:ff9b::a00:1',
  'local-use NAT64': '64:ff9b:1::a00:1',
  '6to4': '2002:a00:1::',
  'Teredo server': '2001:0:a00:1::1',
  'Teredo client (inverted)': '2001:0:4136:e378:8000:63bf:f5ff:fffe',
};

/** Each spelling as the URL's literal host and as the one address of a host name. */
function urlsOf(spellings: Record<string, string>, tag: string): [string, string][] {
  return Object.entries(spellings).flatMap(([name, address], i) => {
    const host = `${tag}-${i}.example`;
    dns.set(host, [address]);
    return [
      [`${name}, literal`, `https://[${address}]/hooks`],
      [`${name}, resolved`, `https://${host}/hooks`],
    ] as [string, string][];
  });
}

for (const target of testDatabases()) {
  describe(`webhook receivers at IPv4 addresses inside IPv6 [${target.name}]`, () => {
    let server: TestServer;
    /** Allowed private receivers. */
    let lab: Tokens;
    /** The default rules: public receivers only. */
    let plain: Tokens;

    const put = (token: string, url: string) => partnerApi(server, 'PUT', '/webhook', { token, body: { url } });
    const assertRefused = async (token: string, label: string, url: string) => {
      const [problem] = fieldErrors(assertError(await put(token, url), 400, 'VALIDATION_ERROR'));
      assert.equal(problem?.field, 'url', label);
      assert.match(problem?.message ?? '', /does not resolve to a public address/, label);
    };

    before(async () => {
      server = await startTestServer(target, { webhookResolver: resolver });
      lab = await partnerWithModes(server, 'lab', { allow_private_webhooks: true });
      plain = await partnerWithModes(server, 'plain');
    });
    after(() => server.stop());

    test('a metadata or host-service address inside IPv6 is refused in every spelling, whatever the allowance', async () => {
      for (const [label, url] of urlsOf(HOST_SERVICE_SPELLINGS, 'metadata')) {
        await assertRefused(lab.live, `allowed private receivers: ${label}`, url);
        await assertRefused(plain.live, `default rules: ${label}`, url);
      }
      assertError(await partnerApi(server, 'GET', '/webhook', { token: lab.live }), 404, 'NOT_FOUND');
    });

    test('a private address inside IPv6 is refused under the default rules and allowed with the allowance', async () => {
      for (const [label, url] of urlsOf(PRIVATE_SPELLINGS, 'private')) {
        await assertRefused(plain.live, label, url);
        const allowed = await put(lab.live, url);
        assert.equal(allowed.status, 200, `${label}: ${allowed.text}`);
      }
      assert.equal((await partnerApi(server, 'DELETE', '/webhook', { token: lab.live })).status, 200);
    });
  });
}
