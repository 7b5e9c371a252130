import Fastify from 'fastify';

/**
 * The baseline of the benchmark: the same framework, one route, no
 * authentication, no database. What the product adds is measured against it.
 */
const app = Fastify({ logger: false });
app.get('/bare', async () => ({ status: 'success', data: { ok: true } }));
const url = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ msg: 'tenantry serving', partner_api: url, operator_api: url })}\n`);
process.on('SIGTERM', () => {
  app.close().then(() => process.exit(0));
});
