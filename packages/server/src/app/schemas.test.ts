import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestServer, testDatabases } from '../../test/harness.ts';

const embedded = testDatabases().find((target) => target.name === 'pglite');

/**
 * Both APIs' schemas compile after the server starts, so a schema that does not compile
 * would no longer stop the start: this test is where it fails instead.
 */
test("every schema of both APIs compiles: the server's warm-up compiles them all and reports none failed", async () => {
  assert.ok(embedded);
  const server = await startTestServer(embedded);
  try {
    const warmed = await server.schemasWarmed;
    assert.deepEqual(
      warmed.failed.map(({ what, error }) => `${what}: ${error.message}`),
      [],
    );
    assert.equal(warmed.remaining, 0);
    assert.ok(warmed.compiled > 100, `${warmed.compiled} schemas compiled: the partner and operator APIs' routes`);
    const line = server.logs.find((entry) => entry.msg === 'schemas compiled');
    assert.equal(line?.compiled, warmed.compiled, 'the warm-up is logged with its count');
  } finally {
    await server.stop();
  }
});
