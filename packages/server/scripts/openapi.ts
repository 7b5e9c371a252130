/**
 * `npm run openapi`: writes the partner API's OpenAPI document, as the server generates it, to
 * `docs/openapi.json`. CI fails when the committed copy differs (src/openapi/openapi.test.ts).
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { http } from '../test/client.ts';
import { startTestServer, testDatabases } from '../test/harness.ts';

export const COMMITTED_OPENAPI = fileURLToPath(new URL('../../../docs/openapi.json', import.meta.url));

const [embedded] = testDatabases();
if (!embedded) throw new Error('no embedded database');
const server = await startTestServer(embedded);
try {
  const document = await http(server.partnerUrl, 'GET', '/api/public/v1/openapi.json');
  if (document.status !== 200) {
    const errors = server.logs.filter((line) => line.err !== undefined).map((line) => JSON.stringify(line.err, null, 2));
    throw new Error(`GET /openapi.json answered ${document.status}: ${document.text}\n${errors.join('\n')}`);
  }
  writeFileSync(COMMITTED_OPENAPI, `${JSON.stringify(document.body, null, 2)}\n`);
  process.stdout.write(`wrote ${COMMITTED_OPENAPI} (${Object.keys((document.body as { paths: object }).paths).length} paths)\n`);
} finally {
  await server.stop();
}
