import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from './catalogue.ts';

test('an ApiError is an answer: its code, status and message, and no stack trace to capture', () => {
  const error = new ApiError('RATE_LIMITED', 'Slow down.', { retryAfter: 3 });
  assert.ok(error instanceof Error);
  assert.equal(error.code, 'RATE_LIMITED');
  assert.equal(error.status, 429);
  assert.equal(error.retryAfter, 3);
  assert.equal(error.stack, 'ApiError: Slow down.');
});

test('making one leaves the stack traces of real faults as they were', () => {
  const before = Error.stackTraceLimit;
  new ApiError('NOT_FOUND', 'No.');
  assert.equal(Error.stackTraceLimit, before);
  assert.match(new Error('a fault').stack ?? '', /\n\s+at /);
});
