import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { DOCUMENT, GENERATED, generateTypes } from '../scripts/generate-types.ts';

test('the SDK types are generated from the committed OpenAPI document (run `npm run openapi` after changing a route)', async () => {
  const document = JSON.parse(readFileSync(DOCUMENT, 'utf8')) as Parameters<typeof generateTypes>[0];
  assert.equal(readFileSync(GENERATED, 'utf8'), await generateTypes(document), 'packages/sdk/src/generated/api.ts is out of date');
});

test('every webhook event of the document is in the WebhookEvent union', () => {
  const document = JSON.parse(readFileSync(DOCUMENT, 'utf8')) as { webhooks: Record<string, unknown> };
  const generated = readFileSync(GENERATED, 'utf8');
  for (const event of Object.keys(document.webhooks)) assert.match(generated, new RegExp(`event: '${event.replace('.', '\\.')}';`), event);
});
