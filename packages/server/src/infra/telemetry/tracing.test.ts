import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { registerHooks } from 'node:module';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';

// Every module this process resolves from here on: the server's too, since they are imported below.
const resolved: string[] = [];
registerHooks({
  resolve(specifier, context, next) {
    const result = next(specifier, context);
    resolved.push(result.url);
    return result;
  },
});
/**
 * Whether the OpenTelemetry SDK (tracer, exporter, context manager) was loaded. `@opentelemetry/api`, the
 * SDK-less facade, is not counted: prom-client's process metrics require it for their exemplars.
 */
const openTelemetryLoaded = () => resolved.some((url) => url.includes('/@opentelemetry/') && !url.includes('/@opentelemetry/api/'));

const { partnerApi } = await import('../../../test/client.ts');
const { startTestServer, testDatabases } = await import('../../../test/harness.ts');
const { createCustomer, eventually, partnerWithModes } = await import('../../../test/provisioning.ts');
const { TEST_CA_FILE, tableResolver, WebhookReceiver } = await import('../../../test/webhook-receiver.ts');

/** A span as OTLP/JSON carries it (ids in hex). */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
  links?: { traceId: string; spanId: string }[];
}

/** An OpenTelemetry collector's OTLP/HTTP traces endpoint, in this process: it keeps every span sent. */
class OtlpReceiver {
  readonly spans: OtlpSpan[] = [];
  readonly contentTypes: string[] = [];
  readonly #server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      this.contentTypes.push(`${request.method} ${request.url} ${request.headers['content-type']}`);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
      };
      for (const resource of body.resourceSpans) for (const scope of resource.scopeSpans) this.spans.push(...scope.spans);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  named(name: string): OtlpSpan[] {
    return this.spans.filter((span) => span.name === name);
  }
}

const attribute = (span: OtlpSpan | undefined, key: string) => {
  const value = span?.attributes.find((a) => a.key === key)?.value;
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : Number(value.intValue));
};

test('without OTEL_EXPORTER_OTLP_ENDPOINT the OpenTelemetry SDK is not loaded, whatever the server does', async () => {
  const [target] = testDatabases();
  assert.ok(target);
  const server = await startTestServer(target);
  try {
    const tokens = await partnerWithModes(server, 'quiet');
    await createCustomer(server, tokens.live, 'quiet-one');
    await eventually(
      () => partnerApi<{ data: { status: string } }>(server, 'GET', '/customers/quiet-one', { token: tokens.live }),
      (r) => r.body.data.status === 'active',
    );
  } finally {
    await server.stop();
  }
  assert.ok(
    resolved.some((url) => url.includes('/prom-client/')),
    'the hook sees the modules the server loads',
  );
  assert.equal(openTelemetryLoaded(), false);
});

for (const target of testDatabases()) {
  describe(`traces [${target.name}]`, () => {
    const collector = new OtlpReceiver();
    let endpoint: string;
    before(async () => {
      endpoint = await collector.listen();
    });
    after(() => collector.close());

    test("a request's span, the operation's look linked to it, its platform call under the look, the delivery linked to the look", async () => {
      const { dns, resolver } = tableResolver();
      dns.set('receiver.test', ['127.0.0.1']);
      const receiver = await new WebhookReceiver().listen();
      const server = await startTestServer(target, {
        env: { TENANTRY_WEBHOOK_CA_FILE: TEST_CA_FILE, OTEL_EXPORTER_OTLP_ENDPOINT: `${endpoint}/`, OTEL_SERVICE_NAME: 'tenantry-test' },
        webhookResolver: resolver,
      });
      let requestId: string;
      let operationId: string;
      try {
        const tokens = await partnerWithModes(server, 'traced', { allow_private_webhooks: true });
        const put = await partnerApi(server, 'PUT', '/webhook', {
          token: tokens.live,
          body: { url: receiver.url('/hooks', 'receiver.test') },
        });
        assert.equal(put.status, 200, put.text);
        const created = await partnerApi<{ data: { operation: { id: string } } }>(server, 'POST', '/customers', {
          token: tokens.live,
          body: { id: 'traced-one', owner: { username: 'owner', email: 'owner@traced.example' } },
        });
        assert.equal(created.status, 202, created.text);
        requestId = created.headers.get('x-request-id') ?? '';
        operationId = created.body.data.operation.id;
        await eventually(
          async () => receiver.of('customer.ready'),
          (ready) => ready.length === 1,
        );
      } finally {
        // Closing the server exports the spans still buffered.
        await server.stop();
        await receiver.close();
      }
      assert.ok(openTelemetryLoaded());
      assert.ok(
        collector.contentTypes.every((c) => c.startsWith('POST /v1/traces application/json')),
        collector.contentTypes.join(),
      );

      const request = collector.named('POST /api/public/v1/customers').find((s) => attribute(s, 'tenantry.request_id') === requestId);
      assert.ok(request, 'the request has its span');
      assert.equal(attribute(request, 'http.route'), '/api/public/v1/customers');
      assert.equal(attribute(request, 'http.response.status_code'), 202);

      const looks = collector.named('operation customer.create').filter((s) => attribute(s, 'tenantry.operation.id') === operationId);
      assert.ok(looks.length >= 1, 'the operation has its looks');
      for (const look of looks) {
        assert.deepEqual(
          look.links?.map((l) => [l.traceId, l.spanId]),
          [[request.traceId, request.spanId]],
        );
        assert.notEqual(look.traceId, request.traceId, 'a look is a trace of its own, linked to the request');
      }
      const finishing = looks.find((s) => attribute(s, 'tenantry.operation.result') === 'done');
      assert.ok(finishing);
      const calls = collector.spans.filter((s) => s.name.startsWith('platform ') && s.parentSpanId === finishing.spanId);
      assert.ok(calls.length >= 1, 'the platform calls of the look hang under it');
      for (const call of calls) {
        assert.equal(call.traceId, finishing.traceId);
        assert.equal(attribute(call, 'tenantry.operation.id'), operationId);
      }

      const delivered = receiver.of('customer.ready')[0]?.body.id;
      const delivery = collector.named('webhook delivery').find((s) => attribute(s, 'tenantry.delivery.id') === delivered);
      assert.ok(delivery, 'the delivery has its span');
      assert.deepEqual(
        delivery.links?.map((l) => [l.traceId, l.spanId]),
        [[finishing.traceId, finishing.spanId]],
      );
      assert.equal(attribute(delivery, 'http.response.status_code'), 200);
    });
  });
}
