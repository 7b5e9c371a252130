import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { assertError, partnerApi } from '../../test/client.ts';
import { SERVER_DATABASE_URL, startTestServer, type TestServer, testDatabases } from '../../test/harness.ts';
import { createCustomer, customerBody, eventually, lockWaiters, partnerWithModes } from '../../test/provisioning.ts';

/**
 * A partner's creates that arrive while its two create statements run go together in the next one
 * (decision 259): one statement, one lock of the partner's row, one commit. To line a burst up, the
 * partner's row is locked from a second connection (which the embedded database does not have: PostgreSQL
 * only) until the two running creates wait for it and the rest wait in the server; a commit's
 * transaction id (`xmin`) then tells which creates were written together.
 */
describe('a burst of creates written together', { skip: SERVER_DATABASE_URL ? false : 'TENANTRY_TEST_DATABASE_URL is not set' }, () => {
  let server: TestServer;
  let locker: pg.Client;
  before(async () => {
    const target = testDatabases().find((database) => database.name === 'postgres');
    assert.ok(target);
    server = await startTestServer(target);
    locker = new pg.Client({ connectionString: server.databaseUrl });
    await locker.connect();
  });
  after(async () => {
    await locker?.end();
    await server?.stop();
  });

  /**
   * Sends `first` (two creates, which take the partner's statements) and then `rest` while the partner's
   * row is locked; releases it once the two wait for it and the rest wait in the server. Answers each
   * create's answer, in the order of `[...first, ...rest]`.
   */
  async function burst(partner: string, token: string, first: string[], rest: string[]) {
    await locker.query('begin');
    // The lock a create's count takes (its rows' foreign keys, which take a key-share lock, pass).
    await locker.query('select 1 from partners where id = $1 for no key update', [partner]);
    try {
      const send = (id: string) =>
        partnerApi<{ error?: { code: string } }>(server, 'POST', '/customers', { token, body: customerBody(id) });
      const running = first.map(send);
      // The second waits behind the first in the row's queue: any backend waiting for a lock counts.
      await eventually(
        () => lockWaiters(locker, 'anyone'),
        (waiting) => waiting >= first.length,
      );
      const waiting = rest.map(send);
      await eventually(
        async () => server.services.customers.createsWaiting({ partnerId: partner, mode: 'live' }),
        (count) => count === rest.length,
      );
      await locker.query('commit');
      return await Promise.all([...running, ...waiting]);
    } finally {
      await locker.query('rollback').catch(() => undefined);
    }
  }

  /** The transaction that wrote each customer of the partner, by id. */
  async function writtenBy(partner: string): Promise<Map<string, string>> {
    const { rows } = await locker.query<{ id: string; xmin: string }>('select id, xmin::text from customers where partner_id = $1', [
      partner,
    ]);
    return new Map(rows.map((row) => [row.id, row.xmin]));
  }

  test('the creates that waited are written by one statement, each counted, with its rows and its operation', async () => {
    const { live } = await partnerWithModes(server, 'together');
    // Not the partner's first customer, whose create makes the pool's allocation in a transaction.
    await createCustomer(server, live, 'existing');
    const rest = Array.from({ length: 8 }, (_, i) => `later-${i}`);
    const answers = await burst('together', live, ['early-0', 'early-1'], rest);
    assert.deepEqual(
      answers.map((answer) => answer.status),
      Array(10).fill(202),
      answers.map((answer) => answer.text).join('\n'),
    );
    const written = await writtenBy('together');
    assert.equal(new Set(rest.map((id) => written.get(id))).size, 1, 'the eight that waited share one transaction');
    assert.notEqual(written.get('early-0'), written.get('later-0'));

    const whoami = await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token: live });
    assert.equal(whoami.body.data.customer_count, 11);
    const operations = await locker.query<{ n: number }>(
      `select count(distinct o.id)::int as n from operations o join customers c on c.uid = o.customer_uid
        join users u on u.customer_uid = c.uid and u.is_owner join projects p on p.customer_uid = c.uid
       where c.partner_id = 'together' and o.type = 'customer.create'`,
    );
    assert.equal(operations.rows[0]?.n, 11, 'each customer has its owner, its first project and its own operation');
  });

  test('a batch that cannot be written whole is written create by create: each gets its own answer', async () => {
    const { live } = await partnerWithModes(server, 'apart', {
      limits: { max_customers: 7, rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 },
    });
    await createCustomer(server, live, 'existing');
    // Six wait together: `early-0` is taken again (its unique key fails the batch's statement), and only
    // four of the other five fit under the maximum of seven.
    const rest = ['early-0', 'late-0', 'late-1', 'late-2', 'late-3', 'late-4'];
    const answers = await burst('apart', live, ['early-0', 'early-1'], rest);
    assert.equal(answers[0]?.status, 202, answers[0]?.text ?? '');
    assert.equal(answers[1]?.status, 202, answers[1]?.text ?? '');
    assertError(answers[2] as Parameters<typeof assertError>[0], 409, 'ALREADY_EXISTS');
    // Alone again, two at a time: which of the last two took the sixth place is the lock's to say.
    const late = answers.slice(3);
    assert.deepEqual(late.map((answer) => answer.status).sort(), [202, 202, 202, 202, 403], late.map((answer) => answer.text).join('\n'));
    assertError(late.find((answer) => answer.status === 403) as Parameters<typeof assertError>[0], 403, 'LIMIT_REACHED');

    const written = await writtenBy('apart');
    assert.equal(written.size, 7);
    const made = [...written].filter(([id]) => id.startsWith('late-')).map(([, xmin]) => xmin);
    assert.equal(new Set(made).size, 4, 'each written on its own');
    const whoami = await partnerApi<{ data: { customer_count: number } }>(server, 'GET', '/auth/whoami', { token: live });
    assert.equal(whoami.body.data.customer_count, 7);
  });
});
