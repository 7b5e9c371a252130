import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { startTestServer, type TestServer, testDatabases } from '../../../test/harness.ts';
import { activeCustomer, partnerWithModes } from '../../../test/provisioning.ts';
import { ASYNCHRONOUS_COMMIT } from '../../infra/db/database.ts';

const postgres = testDatabases().find((target) => target.name === 'postgres');

describe("the sandbox's writes on a PostgreSQL server", { skip: !postgres && 'needs TENANTRY_TEST_DATABASE_URL' }, () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer(postgres as NonNullable<typeof postgres>);
  });
  after(() => server?.stop());

  test('go through the connections whose commits do not wait for the disk; Tenantry’s own through the others', async () => {
    const acme = await partnerWithModes(server, 'acme');
    await activeCustomer(server, acme.live, 'globex');
    // Each session's last statement, as the database shows it; the sandbox's sessions are named apart.
    const sessions = (
      await sql<{ application_name: string; query: string }>`
        select application_name, query from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`.execute(
        server.database.db,
      )
    ).rows;
    const asynchronous = sessions.filter((s) => s.application_name.endsWith(`(${ASYNCHRONOUS_COMMIT})`));
    assert.ok(asynchronous.length > 0, JSON.stringify(sessions));
    assert.ok(
      asynchronous.some((s) => /sandbox_/.test(s.query)),
      `a sandbox statement ran on them: ${JSON.stringify(asynchronous)}`,
    );
    // The sandbox's statements name its tables; its own short transactions end with a commit.
    for (const session of asynchronous)
      assert.match(session.query, /sandbox_|^show synchronous_commit$|^(begin|commit|rollback)$/, 'only the sandbox uses them');
    assert.ok(!server.logs.some((line) => String(line.msg).includes('asynchronous commit is not available')));
  });
});
