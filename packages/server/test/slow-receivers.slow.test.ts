import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type HttpResult, partnerApi } from './client.ts';
import { createServerDatabase, dropServerDatabase, SERVER_DATABASE_URL } from './harness.ts';
import { customerBody, eventually } from './provisioning.ts';
import { groupPartner, ServiceGroup } from './service-group.ts';
import { type Answer, WebhookReceiver } from './webhook-receiver.ts';

/**
 * Webhook receivers that hang, reset the connection or answer after seconds, behind partners of three
 * processes: another partner's deliveries and the API answer as they do without them. Each figure is
 * measured twice in one run under the same load, every partner's customers suspended and resumed: first
 * with every receiver answering at once, then with three of them misbehaving.
 */
const PHASE_MS = 8_000;
const CUSTOMERS = 4;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;
};

describe('receivers that hang, reset or crawl, with three processes', {
  skip: SERVER_DATABASE_URL ? false : 'TENANTRY_TEST_DATABASE_URL is not set',
}, () => {
  let url = '';
  let group: ServiceGroup;
  const receivers = new Map<string, WebhookReceiver>();
  const tokens = new Map<string, string>();
  const answers: Record<string, Answer> = { good: 200, hang: 'hang', reset: 'reset', crawl: { status: 200, afterMs: 4_000 } };

  before(async () => {
    url = await createServerDatabase();
    group = await ServiceGroup.start(url, 3);
    for (const name of Object.keys(answers)) {
      const receiver = await new WebhookReceiver().listen();
      receivers.set(name, receiver);
      const { token } = await groupPartner(group.member(0), name);
      tokens.set(name, token);
      for (let i = 0; i < CUSTOMERS; i++) {
        const created = await partnerApi(group.next(), 'POST', '/customers', { token, body: customerBody(`${name}-${i}`) });
        assert.equal(created.status, 202, created.text);
      }
    }
    for (const [name, token] of tokens) {
      await eventually(
        () => partnerApi<{ data: unknown[] }>(group.next(), 'GET', '/customers?status=active&limit=100', { token }),
        (r) => r.body.data.length === CUSTOMERS,
      );
      // The webhook after the creations: only the churn's events are delivered.
      const hook = await partnerApi(group.next(), 'PUT', '/webhook', { token, body: { url: receivers.get(name)?.url() } });
      assert.equal(hook.status, 200, hook.text);
    }
  });
  after(async () => {
    await group?.stop();
    for (const receiver of receivers.values()) await receiver.close();
    if (url) await dropServerDatabase(url);
  });

  /** Suspends and resumes a partner's customers, one event a call, until `until`. */
  const churn = async (name: string, until: number) => {
    const token = tokens.get(name) ?? '';
    await Promise.all(
      Array.from({ length: CUSTOMERS }, async (_, i) => {
        let suspended = false;
        while (Date.now() < until) {
          const answer: HttpResult = await partnerApi(group.next(), 'POST', `/customers/${name}-${i}/${suspended ? 'resume' : 'suspend'}`, {
            token,
            body: {},
          });
          assert.equal(answer.status, 200, answer.text);
          suspended = !suspended;
          await sleep(25);
        }
      }),
    );
  };

  /** The good partner's reads, spread over the processes, until `until`: their latencies. */
  const reads = async (until: number) => {
    const latencies: number[] = [];
    const token = tokens.get('good') ?? '';
    await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        while (Date.now() < until) {
          const started = performance.now();
          const answer = await partnerApi(group.next(), 'GET', `/customers/good-${i % CUSTOMERS}`, { token });
          latencies.push(performance.now() - started);
          assert.equal(answer.status, 200, answer.text);
        }
      }),
    );
    return latencies;
  };

  /** One phase: every partner's churn and the good partner's reads, the other receivers misbehaving or not. */
  const phase = async (withBad: boolean) => {
    for (const [name, receiver] of receivers) {
      const answer = answers[name] ?? 200;
      receiver.answer = () => (withBad ? answer : 200);
    }
    const good = receivers.get('good') as WebhookReceiver;
    const deliveredBefore = good.deliveries.length;
    const until = Date.now() + PHASE_MS;
    const bad = ['hang', 'reset', 'crawl'].map((name) => receivers.get(name)?.deliveries.length ?? 0);
    const [latencies] = await Promise.all([reads(until), ...[...receivers.keys()].map((name) => churn(name, until))]);
    const badAttempts = ['hang', 'reset', 'crawl'].map((name, i) => (receivers.get(name)?.deliveries.length ?? 0) - (bad[i] ?? 0));
    // Every event of the good partner's churn reaches its receiver.
    const events = await partnerApi<{ data: { id: string }[] }>(group.next(), 'GET', '/events?limit=1', { token: tokens.get('good') });
    const newest = events.body.data[0]?.id;
    await eventually(
      async () => good.ids(),
      (ids) => ids.includes(newest ?? ''),
      15_000,
    );
    const lags = good.deliveries.slice(deliveredBefore).map((d) => d.receivedAtMs - Date.parse(d.body.created_at));
    return { apiP99: percentile(latencies, 99), lagP99: percentile(lags, 99), delivered: lags.length, badAttempts };
  };

  test('another partner’s deliveries and the API keep their pace', async (t) => {
    const without = await phase(false);
    const withBad = await phase(true);
    const attempts = ['hang', 'reset', 'crawl'].map((name, i) => `${name} ${withBad.badAttempts[i]}`).join(', ');
    t.diagnostic(
      `without bad receivers: API p99 ${without.apiP99.toFixed(1)} ms, delivery lag p99 ${without.lagP99} ms (${without.delivered} delivered); ` +
        `with them: API p99 ${withBad.apiP99.toFixed(1)} ms, lag p99 ${withBad.lagP99} ms (${withBad.delivered} delivered); attempts at the bad receivers: ${attempts}`,
    );
    assert.ok(withBad.delivered > 0 && without.delivered > 0);
    // Three processes share the deliveries, and none sends one another has sent.
    const good = receivers.get('good') as WebhookReceiver;
    assert.equal(good.deliveries.length, new Set(good.ids()).size, 'each event delivered once');
    assert.ok(withBad.lagP99 < Math.max(1_000, 2 * without.lagP99), `lag p99 ${withBad.lagP99} ms against ${without.lagP99} ms`);
    assert.ok(withBad.apiP99 < 2 * without.apiP99 + 50, `API p99 ${withBad.apiP99} ms against ${without.apiP99} ms`);
    // The bad receivers were tried: the comparison is not of an idle dispatcher.
    for (const [i, name] of ['hang', 'reset', 'crawl'].entries()) assert.ok((withBad.badAttempts[i] ?? 0) > 0, `${name} was tried`);
  });
});
