import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { BUNDLED_CATALOGUE } from '../src/images/sources.ts';
import { parseCatalogue } from '../src/images/validate.ts';

/**
 * The baseline of the OS image bench: node:http alone, one route answering the very bytes tenantry's
 * `GET /api/create-vm/{ns}/os-images` answers (the bundled catalogue), with no framework, no session
 * check and no log line.
 */
const body = Buffer.from(JSON.stringify(parseCatalogue(readFileSync(BUNDLED_CATALOGUE, 'utf8')).images));
const server = createServer((request, response) => {
  if (request.url !== '/os-images') {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length }).end(body);
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${address.port}` })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
