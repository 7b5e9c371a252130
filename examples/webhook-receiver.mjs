// A webhook receiver to develop against, with the SDK as your own code would use it:
//   node examples/webhook-receiver.mjs <signing secret>
// It listens on http://127.0.0.1:3000/hooks, verifies each delivery with verifyWebhook on the raw
// body, and prints it. Point `tenantry listen --forward-to` (or a webhook, over HTTPS) at it.
import { createServer } from 'node:http';
import { verifyWebhook } from '@tenantry/sdk';

const secret = process.argv[2] ?? process.env.TENANTRY_WEBHOOK_SECRET;
if (!secret) {
  console.error('usage: node examples/webhook-receiver.mjs <signing secret>  (or set TENANTRY_WEBHOOK_SECRET)');
  process.exit(2);
}
const port = Number(process.env.PORT ?? 3000);

createServer(async (request, response) => {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  try {
    const event = await verifyWebhook(Buffer.concat(chunks), request.headers, [secret]);
    console.log(`verified ${event.event} ${event.id} ${JSON.stringify(event.data)}`);
    response.writeHead(204).end();
  } catch (error) {
    console.log(`refused a delivery: ${error.message}`);
    response.writeHead(400).end();
  }
}).listen(port, '127.0.0.1', () => console.log(`receiving on http://127.0.0.1:${port}/hooks`));
