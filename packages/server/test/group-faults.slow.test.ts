import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { assertError, type HttpResult, http, OPERATOR_API, partnerApi } from './client.ts';
import { addStandby, type PostgresInstance, skipWithoutPostgresPrograms, startPostgres } from './postgres-instance.ts';
import { customerBody, eventually } from './provisioning.ts';
import { groupPartner, ServiceGroup } from './service-group.ts';
import { startTcpProxy } from './tcp-proxy.ts';
import { WebhookReceiver } from './webhook-receiver.ts';

/**
 * Three processes on a PostgreSQL server of the test's own, through faults: processes killed at
 * random while customers are created and their events delivered, the database restarted under load,
 * and a failover to a synchronous standby behind one address.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const CUSTOMERS = Number(process.env.TENANTRY_TEST_FAULT_CUSTOMERS ?? 2_000);

/**
 * What a partner's call may answer while the service is being hurt: its result, 503 UNAVAILABLE, or for
 * a retry with an Idempotency-Key whose first request is still claimed (its process was killed, or it
 * failed while the database was away), 409 IDEMPOTENCY_KEY_IN_PROGRESS; the last two with Retry-After.
 */
function acceptable(answer: HttpResult, expected: number): boolean {
  if (answer.status === expected) return true;
  if (answer.status === 409) assertError(answer, 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
  else assertError(answer, 503, 'UNAVAILABLE');
  assert.ok(Number(answer.headers.get('retry-after')) >= 1, 'a 503 says when to retry');
  return false;
}

/**
 * Creates customers `prefix0`…, `concurrency` at a time, each retried with its Idempotency-Key until it
 * is acknowledged (202), whichever process answers; a refused connection (a process being killed) is
 * retried too. Answers the acknowledged ids, how many answers were 503 or 409, and the longest time from
 * a creation's first failed attempt to its acknowledgement.
 */
async function createAll(
  group: ServiceGroup,
  token: string,
  prefix: string,
  count: number,
  options: { killing?: boolean; acknowledged?: string[] } = {},
) {
  // The caller's list, when given, shows the load's progress while it runs.
  const acknowledged: string[] = options.acknowledged ?? [];
  let unavailable = 0;
  let longestRetryMs = 0;
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const id = `${prefix}${next++}`;
      let failedAt: number | undefined;
      for (;;) {
        try {
          const answer = await partnerApi(group.next(), 'POST', '/customers', {
            token,
            body: customerBody(id),
            headers: { 'idempotency-key': `create-${id}` },
          });
          if (acceptable(answer, 202)) break;
          unavailable++;
        } catch (error) {
          // The process went away mid-request: the same key again, to another. No process goes away
          // by itself, though.
          if (error instanceof assert.AssertionError || !options.killing) throw error;
        }
        failedAt ??= Date.now();
        await sleep(50);
      }
      if (failedAt !== undefined) longestRetryMs = Math.max(longestRetryMs, Date.now() - failedAt);
      acknowledged.push(id);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  return { acknowledged, unavailable, longestRetryMs };
}

async function query<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** A new database on `server`; its URL. */
async function newDatabase(server: PostgresInstance, name: string): Promise<string> {
  await query(server.url('postgres'), `create database ${name}`);
  return server.url(name);
}

/**
 * How long after `since` each member answered a read of the database again, polling every 50 ms: a
 * request that reaches PostgreSQL, not one the process answers from memory.
 */
async function resumedAfter(group: ServiceGroup, token: string, since: number): Promise<number[]> {
  return Promise.all(
    Array.from({ length: group.size }, async (_, i) => {
      await eventually(
        () => partnerApi(group.member(i), 'GET', '/customers?limit=1', { token }),
        (answer) => acceptable(answer, 200),
        30_000,
      );
      return Date.now() - since;
    }),
  );
}

describe('three processes through faults', { skip: skipWithoutPostgresPrograms() }, () => {
  let server: PostgresInstance;
  before(async () => {
    server = await startPostgres();
  });
  after(async () => {
    await server?.remove();
  });

  test(`kill -9 of a random process every few seconds while ${CUSTOMERS} customers are created and delivered`, async (t) => {
    const url = server.url('postgres');
    const receiver = await new WebhookReceiver().listen();
    const group = await ServiceGroup.start(url, 3, { TENANTRY_SANDBOX_DELAY_MS: '100' });
    let creating = true;
    let killer: Promise<void> = Promise.resolve();
    t.after(async () => {
      creating = false;
      await killer;
      await group.stop();
      await receiver.close();
    });
    // Two partners share the customers: the sandbox gives a partner 1,024 address ranges.
    const tokens: string[] = [];
    for (const id of ['crashy-a', 'crashy-b']) {
      const { token } = await groupPartner(group.member(0), id);
      const hook = await partnerApi(group.member(0), 'PUT', '/webhook', { token, body: { url: receiver.url() } });
      assert.equal(hook.status, 200, hook.text);
      tokens.push(token);
    }

    let kills = 0;
    killer = (async () => {
      while (creating) {
        await sleep(2_000 + randomInt(2_000));
        if (!creating) break;
        const victim = randomInt(3);
        await group.kill(victim);
        kills++;
        await group.startMember(victim);
      }
    })();
    const startedAt = Date.now();
    const created = await Promise.all(
      tokens.map((token, i) => createAll(group, token, `k${i}-`, CUSTOMERS / tokens.length, { killing: true })),
    ).finally(() => {
      creating = false;
    });
    await killer;
    const acknowledged = created.flatMap((c) => c.acknowledged);
    const longestRetryMs = Math.max(...created.map((c) => c.longestRetryMs));
    assert.equal(acknowledged.length, CUSTOMERS);

    // Operations a killed process had claimed are taken over once their lease expires.
    await eventually(
      () => query<{ open: number }>(url, "select count(*)::int as open from operations where status in ('pending', 'running')"),
      (rows) => rows[0]?.open === 0,
      120_000,
    );
    const operations = await query<{ customer_id: string; status: string; error_code: string | null; error_message: string | null }>(
      url,
      'select customer_id, status, error_code, error_message from operations',
    );
    assert.equal(operations.length, CUSTOMERS, 'one operation per customer: no create ran twice');
    const failed = operations.filter((op) => op.status !== 'succeeded');
    assert.deepEqual(failed.slice(0, 5), [], `${failed.length} operations did not succeed`);
    const stuck = await query(url, "select id from customers where status <> 'active'");
    assert.deepEqual(stuck, [], 'no customer stuck');
    const events = await query<{ id: string; customer_id: string }>(
      url,
      "select id, data->>'customer_id' as customer_id from events where type = 'customer.ready'",
    );
    assert.equal(events.length, CUSTOMERS, 'one customer.ready per customer, none lost, none twice');
    assert.equal(new Set(events.map((e) => e.customer_id)).size, CUSTOMERS);

    // Every event reaches the receiver; one sent again (its sender killed before it recorded the answer)
    // carries the same delivery id.
    await eventually(
      async () => new Set(receiver.ids()).size,
      (delivered) => delivered >= events.length,
      120_000,
    );
    assert.deepEqual(new Set(receiver.ids()), new Set(events.map((e) => e.id)));
    for (const delivery of receiver.deliveries) assert.equal(delivery.headers['x-service-delivery'], delivery.body.id);
    const twice = receiver.deliveries.length - new Set(receiver.ids()).size;
    t.diagnostic(
      `${CUSTOMERS} customers with ${kills} kills in ${Date.now() - startedAt} ms; the longest retry of a creation ${longestRetryMs} ms (a killed request's claim waits for its lease); ${twice} deliveries sent again after a kill`,
    );
    assert.ok(twice <= kills * 16, `${twice} repeated deliveries after ${kills} kills`);
  });

  test('the database restarted under load, fast then immediate: 503 UNAVAILABLE meanwhile, no process exits, service resumes', async (t) => {
    const url = await newDatabase(server, 'restarted');
    const group = await ServiceGroup.start(url, 3);
    t.after(() => group.stop());
    const { token } = await groupPartner(group.member(0), 'restarted');
    const restarts: string[] = [];
    const progress: string[] = [];
    const load = createAll(group, token, 'r', 600, { acknowledged: progress });
    for (const [i, mode] of (['fast', 'immediate'] as const).entries()) {
      // The fault lands in the middle of the load: after a third of it, then after two thirds.
      await eventually(
        async () => progress.length,
        (acknowledgedSoFar) => acknowledgedSoFar >= 200 * (i + 1),
        60_000,
      );
      const down = Date.now();
      await server.restart(mode);
      const up = Date.now();
      const resumed = await resumedAfter(group, token, up);
      restarts.push(`${mode}: down ${up - down} ms, each process answering ${resumed.join(', ')} ms after`);
      for (const ms of resumed) assert.ok(ms <= 5_000, `resumed ${ms} ms after the database (${mode})`);
    }
    const { acknowledged, unavailable, longestRetryMs } = await load;
    t.diagnostic(`${restarts.join('; ')}; ${unavailable} answers were 503 or 409; the longest retry ${longestRetryMs} ms`);
    // A claim its request could not release while the database was away is released once it is back:
    // the retry runs then, not when the claim's lease (a minute) runs out.
    assert.ok(longestRetryMs < 10_000, `a creation retried for ${longestRetryMs} ms`);
    for (let i = 0; i < group.size; i++) assert.ok(group.alive(i), `process ${i} is still running`);
    // Every acknowledged creation is there and finishes.
    await eventually(
      () => query<{ active: number }>(url, "select count(*)::int as active from customers where status = 'active'"),
      (rows) => rows[0]?.active === acknowledged.length,
      60_000,
    );
    const ids = (await query<{ id: string }>(url, 'select id from customers')).map((row) => row.id);
    assert.deepEqual(new Set(ids), new Set(acknowledged));
  });

  test('failover to a synchronous standby behind one address: the processes reconnect and no acknowledged write is lost', async (t) => {
    const primary = await startPostgres();
    const standby = await addStandby(primary, { synchronous: true });
    const proxy = await startTcpProxy(primary.port);
    const group = await ServiceGroup.start(`postgres://postgres@127.0.0.1:${proxy.port}/postgres`, 3);
    let issuing = true;
    t.after(async () => {
      issuing = false;
      await group.stop();
      await proxy.close();
      await primary.remove();
      await standby.remove();
    });
    const { token } = await groupPartner(group.member(0), 'moved');
    // Keys issued and events read while the load runs: each one acknowledged before the failover.
    const keys: string[] = [];
    const issuer = (async () => {
      while (issuing) {
        try {
          const issued = await http<{ data: { key: string } }>(group.next().operatorUrl, 'POST', `${OPERATOR_API}/partners/moved/keys`, {
            token: group.operatorToken,
            body: {},
          });
          if (acceptable(issued, 201)) keys.push(issued.body.data.key);
        } finally {
          await sleep(100);
        }
      }
    })();
    const progress: string[] = [];
    const load = createAll(group, token, 'f', 600, { acknowledged: progress });
    // The primary dies in the middle of the load.
    await eventually(
      async () => progress.length,
      (acknowledgedSoFar) => acknowledgedSoFar >= 200,
      60_000,
    );
    const seenEvents = await partnerApi<{ data: { id: string }[] }>(group.member(1), 'GET', '/events?limit=100', { token });
    assert.equal(seenEvents.status, 200, seenEvents.text);
    const cut = Date.now();
    await primary.stop('immediate');
    await standby.promote();
    proxy.moveTo(standby.port);
    const resumed = await resumedAfter(group, token, cut);
    const { acknowledged, unavailable, longestRetryMs } = await load;
    issuing = false;
    await issuer;
    t.diagnostic(
      `each process answering ${resumed.join(', ')} ms after the primary was killed; ${unavailable} answers were 503 or 409; the longest retry ${longestRetryMs} ms`,
    );
    assert.ok(longestRetryMs < 10_000, `a creation retried for ${longestRetryMs} ms`);
    for (let i = 0; i < group.size; i++) assert.ok(group.alive(i), `process ${i} is still running`);
    const url = standby.url('postgres');
    const ids = (await query<{ id: string }>(url, 'select id from customers')).map((row) => row.id);
    assert.deepEqual(new Set(ids), new Set(acknowledged), 'every acknowledged customer is on the new primary');
    const events = new Set((await query<{ id: string }>(url, 'select id from events')).map((row) => row.id));
    for (const event of seenEvents.body.data) assert.ok(events.has(event.id), `event ${event.id} read before the failover is kept`);
    for (const key of keys) {
      const exchanged = await partnerApi(group.next(), 'POST', '/auth/token', { body: { api_key: key } });
      assert.equal(exchanged.status, 200, `key issued before the failover still exchanges: ${exchanged.text}`);
    }
    await eventually(
      () => query<{ active: number }>(url, "select count(*)::int as active from customers where status = 'active'"),
      (rows) => rows[0]?.active === acknowledged.length,
      60_000,
    );
  });
});
