import assert from 'node:assert/strict';
import type pg from 'pg';
import { assertError, createPartner, exchange, issueKey, partnerApi } from './client.ts';
import type { TestServer } from './harness.ts';

/** Helpers for suites that provision customers through the partner API. */
export interface OperationBody {
  id: string;
  type: string;
  status: string;
  customer_id: string;
  project: string | null;
  finished_at: string | null;
  error: { code: string; message: string } | null;
}

export interface Tokens {
  id: string;
  live: string;
  test: string;
  liveKey: string;
  testKey: string;
}

/** A partner with a live and a test token; `settings` go to the operator's create call. */
export async function partnerWithModes(server: TestServer, id: string, settings: Record<string, unknown> = {}): Promise<Tokens> {
  await createPartner(server, id, { limits: { rate_limit_per_minute: 100_000, rate_limit_burst: 10_000 }, ...settings });
  const liveKey = await issueKey(server, id);
  const testKey = await issueKey(server, id, { mode: 'test' });
  const probe = await exchange(server, liveKey);
  // A new partner's credentials take a third of the sandbox delay (PARTNER_NOT_READY until then).
  if (probe.status === 503) server.clock.advance(Number(probe.headers.get('retry-after')) * 1000);
  const live = await exchange(server, liveKey);
  const test = await exchange(server, testKey);
  assert.equal(live.status, 200, live.text);
  assert.equal(test.status, 200, test.text);
  return { id, live: live.body.access_token, test: test.body.access_token, liveKey, testKey };
}

/** New tokens for both modes (after the server clock moved past their expiry). */
export async function refreshTokens(server: TestServer, tokens: Tokens): Promise<void> {
  tokens.live = (await exchange(server, tokens.liveKey)).body.access_token;
  tokens.test = (await exchange(server, tokens.testKey)).body.access_token;
}

export function customerBody(id: string, extra: Record<string, unknown> = {}) {
  return { id, owner: { username: 'owner', email: `owner@${id}.example` }, ...extra };
}

export async function createCustomer(server: TestServer, token: string, id: string, extra: Record<string, unknown> = {}) {
  const result = await partnerApi<{ data: { customer: Record<string, unknown>; operation: OperationBody } }>(server, 'POST', '/customers', {
    token,
    body: customerBody(id, extra),
  });
  assert.equal(result.status, 202, result.text);
  return result.body.data;
}

/** Reads an operation until it has finished (each read advances it); fails after `timeoutMs` of real time. */
export async function waitForOperation(server: TestServer, token: string, customerId: string, operationId: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await partnerApi<{ data: OperationBody }>(server, 'GET', `/customers/${customerId}/operations/${operationId}`, {
      token,
    });
    assert.equal(result.status, 200, result.text);
    if (result.body.data.finished_at !== null) return result.body.data;
    assert.ok(Date.now() < deadline, `operation ${operationId} did not finish: ${result.text}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Creates a customer and waits until it is active (the server under test runs with no sandbox delay). */
export async function activeCustomer(server: TestServer, token: string, id: string, extra: Record<string, unknown> = {}) {
  const { operation } = await createCustomer(server, token, id, extra);
  const finished = await waitForOperation(server, token, id, operation.id);
  assert.equal(finished.status, 'succeeded', JSON.stringify(finished));
}

/** Polls a read until `check` passes (the background engine moves things along), at most `timeoutMs`. */
export async function eventually<T>(read: () => Promise<T>, check: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    assert.ok(Date.now() < deadline, `condition not reached: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * How many backends of this database wait for a lock: held by `client`'s own session (`'client'`), or by
 * anyone (`'anyone'`: a backend queued behind another waiter counts too). Read afresh each time: inside a
 * transaction PostgreSQL answers pg_stat_activity from a snapshot taken at its first read, so a
 * connection a server's pool opened after it would never be counted.
 */
export async function lockWaiters(client: Pick<pg.Client, 'query'>, heldBy: 'client' | 'anyone'): Promise<number> {
  await client.query('select pg_stat_clear_snapshot()');
  const blocked = heldBy === 'client' ? 'pg_blocking_pids(pid) @> array[pg_backend_pid()]' : 'cardinality(pg_blocking_pids(pid)) > 0';
  const { rows } = await client.query<{ waiting: number }>(
    `select count(*)::int as waiting from pg_stat_activity where datname = current_database() and ${blocked}`,
  );
  return rows[0]?.waiting ?? 0;
}

export async function waitGone(server: TestServer, token: string, path: string): Promise<void> {
  await eventually(
    () => partnerApi(server, 'GET', path, { token }),
    (r) => r.status === 404,
  );
  assertError(await partnerApi(server, 'GET', path, { token }), 404, 'NOT_FOUND');
}

export interface EventRow {
  id: string;
  type: string;
  mode: string;
  data: Record<string, unknown>;
  created_at: Date;
}

/**
 * The partner's recorded events (the outbox webhooks deliver from), oldest
 * first, read from the database: every row, whatever its age or mode clock.
 */
export async function eventsOf(server: TestServer, partnerId: string, mode: 'live' | 'test' = 'live'): Promise<EventRow[]> {
  const rows = await server.database.db
    .selectFrom('events')
    .select(['id', 'type', 'mode', 'data', 'created_at'])
    .where('partner_id', '=', partnerId)
    .where('mode', '=', mode)
    .orderBy('id')
    .execute();
  return rows as EventRow[];
}
