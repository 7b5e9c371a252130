import assert from 'node:assert/strict';
import { test } from 'node:test';
import { referenceHmacSha256 } from '../../test/webhook-receiver.ts';
import { signDelivery } from './signature.ts';

/** CONTRACT §4, "Webhook signature: the key bytes": the published test vector. */
const SECRET = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
const BODY = '{"id":"dlv_01","event":"ping","created_at":"2026-01-01T00:00:00Z","partner_id":"acme","data":{"message":"hello"}}';
const EXPECTED = 'sha256=a950142e836abb4e35bf2bcb2343d8de51b50de303fa05a6230fa81caa629a21';

test('the signature of the CONTRACT test vector', () => {
  assert.equal(Buffer.byteLength(BODY), 113);
  assert.equal(signDelivery(SECRET, 1767225600, BODY), EXPECTED);
});

test('the test suite verifies with an HMAC written from RFC 2104, which agrees on the vector', () => {
  assert.equal(`sha256=${referenceHmacSha256(Buffer.from(SECRET, 'ascii'), Buffer.from(`1767225600.${BODY}`))}`, EXPECTED);
  // The key is the 64 ASCII characters, not the 32 bytes they encode.
  assert.notEqual(
    signDelivery(SECRET, 1767225600, BODY),
    `sha256=${referenceHmacSha256(Buffer.from(SECRET, 'hex'), Buffer.from(`1767225600.${BODY}`))}`,
  );
});
