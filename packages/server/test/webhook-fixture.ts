import assert from 'node:assert/strict';
import { after, before, beforeEach } from 'node:test';
import { partnerApi } from './client.ts';
import { startTestServer, type TestDatabase, type TestServer } from './harness.ts';
import { eventually, partnerWithModes, refreshTokens, type Tokens } from './provisioning.ts';
import { TEST_CA_FILE, tableResolver, WebhookReceiver } from './webhook-receiver.ts';

/**
 * What the webhook tests share: a server whose webhook client trusts the loopback receiver, that
 * receiver, two partners, and the calls the tests make of them.
 */

/** Host names the test resolver answers; anything else does not resolve. */
export const { dns, resolver } = tableResolver();

export interface Config {
  url: string;
  events: string[];
  enabled: boolean;
  signing_secret?: string;
  signing_secret_configured: boolean;
  previous_secret_valid_until: string | null;
}
export interface DeliveryRecord {
  id: string;
  event: string;
  delivered: boolean;
  attempts: number;
  status: number | null;
  error: string | null;
  at: string;
}
export interface EventBody {
  id: string;
  event: string;
  created_at: string;
  partner_id: string;
  data: Record<string, unknown>;
}

export interface WebhookWorld {
  server: TestServer;
  receiver: WebhookReceiver;
  /** Allowed private destinations, so it can use the loopback receiver. */
  lab: Tokens;
  /** A partner with the default rules: public receivers only. */
  plain: Tokens;
}

/** Starts the server and the receiver and makes the two partners (a test file's `before`). */
async function openWebhookWorld(target: TestDatabase): Promise<WebhookWorld> {
  dns.set('receiver.test', ['127.0.0.1']);
  const receiver = await new WebhookReceiver().listen();
  const server = await startTestServer(target, { env: { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE }, webhookResolver: resolver });
  const lab = await partnerWithModes(server, 'lab', { allow_private_webhooks: true });
  const plain = await partnerWithModes(server, 'plain');
  return { server, receiver, lab, plain };
}

async function closeWebhookWorld(world: WebhookWorld): Promise<void> {
  await world.server.stop();
  await world.receiver.close();
}

/** A test's fresh start (`beforeEach`): the receiver answers 200, and tokens are new (tests move the clock by minutes and days). */
async function freshWebhookTest(world: WebhookWorld): Promise<void> {
  world.receiver.answer = () => 200;
  await refreshTokens(world.server, world.lab);
  await refreshTokens(world.server, world.plain);
}

/** The calls the tests make, on the world `world()` answers once it is open. */
export function webhookCalls(world: () => WebhookWorld) {
  const api = <T = Record<string, unknown>>(
    token: string,
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ) => partnerApi<T>(world().server, method, path, { token, ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) });
  const configure = async (token: string, body: Record<string, unknown>) => {
    const result = await api<{ data: Config }>(token, 'PUT', '/webhook', body);
    assert.equal(result.status, 200, result.text);
    return result.body.data;
  };
  return {
    api,
    configure,
    deliveries: async (token: string, query = '') => {
      const result = await api<{ data: DeliveryRecord[]; pagination: { next_cursor: string | null } }>(
        token,
        'GET',
        `/webhook/deliveries${query}`,
      );
      assert.equal(result.status, 200, result.text);
      return result.body;
    },
    /** Waits until the receiver holds `count` deliveries matching `where`. */
    received: (where: (d: WebhookReceiver['deliveries'][number]) => boolean, count = 1) =>
      eventually(
        async () => world().receiver.deliveries.filter(where),
        (list) => list.length >= count,
      ),
    /** Every attempt under way has its outcome recorded (so a retry is scheduled before the clock moves). */
    settled: () =>
      eventually(
        () => world().server.database.db.selectFrom('webhook_deliveries').select('id').where('lease_until', 'is not', null).execute(),
        (leased) => leased.length === 0,
      ),
    /** A new receiver at `url` (the old one removed), and its signing secret. */
    secretOf: async (token: string, url: string, events?: string[]) => {
      await api(token, 'DELETE', '/webhook');
      const config = await configure(token, { url, ...(events ? { events } : {}) });
      assert.ok(config.signing_secret);
      return config.signing_secret;
    },
  };
}

/**
 * A test file's world, opened once before its tests and closed after them, each test starting fresh:
 * `opened` hands it to the file's own variables. Answers the calls the tests make of it.
 */
export function useWebhookWorld(target: TestDatabase, opened: (world: WebhookWorld) => void) {
  let world: WebhookWorld | undefined;
  const current = () => {
    if (!world) throw new Error('the webhook world is not open (its before hook failed)');
    return world;
  };
  before(async () => {
    world = await openWebhookWorld(target);
    opened(world);
  });
  after(() => world && closeWebhookWorld(world));
  beforeEach(() => freshWebhookTest(current()));
  return webhookCalls(current);
}
