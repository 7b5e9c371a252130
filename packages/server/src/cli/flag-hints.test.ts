import assert from 'node:assert/strict';
import { test } from 'node:test';
import { maskedCommandLine } from '../../bin/process-title.js';
import { exampleExpiry, expiresAt, flagError, wholeNumber } from './flag-hints.ts';
import { describeFieldErrors } from './operator-client.ts';

const NOW = Date.UTC(2026, 5, 1, 12);

test('--expires-at: a date and time with its zone, in the future; a refusal names the flag and shows one that works', () => {
  assert.equal(expiresAt('2026-09-01T00:00:00Z', NOW), '2026-09-01T00:00:00Z');
  assert.equal(expiresAt('2026-09-01T08:30:00.250+02:00', NOW), '2026-09-01T08:30:00.250+02:00');
  assert.equal(exampleExpiry(NOW), '2026-08-30T00:00:00Z');
  for (const [value, problem] of [
    ['tomorrow', 'must be an ISO 8601 date and time with its zone'],
    ['2026-09-01', 'must be an ISO 8601 date and time with its zone'],
    ['2026-13-45T00:00:00Z', 'must be an ISO 8601 date and time with its zone'],
    ['2026-01-01T00:00:00Z', 'must be in the future'],
  ] as const) {
    assert.throws(
      () => expiresAt(value, NOW),
      (error: Error & { exitCode?: number }) => {
        assert.equal(error.message, `--expires-at ${problem}, for example --expires-at 2026-08-30T00:00:00Z; got "${value}"`);
        assert.equal(error.exitCode, 2);
        return true;
      },
    );
  }
});

test('a whole number, and a refusal of an argument rather than a flag', () => {
  assert.equal(wholeNumber({ flag: '--limit', example: '100' }, '25'), 25);
  assert.throws(
    () => wholeNumber({ flag: '--limit', example: '100' }, '2.5'),
    /^CliError: --limit must be a whole number, for example --limit 100; got "2.5"$/,
  );
  assert.equal(flagError({ flag: '<id>', example: 'acme' }, 'is too long').message, '<id> is too long, for example acme');
});

test("the API's field errors are named by the flags that fill them, nested fields too; none of them, the API's words", () => {
  const hints = {
    allow_cidrs: { flag: '--allow-cidr', example: '203.0.113.0/24' },
    'limits.max_customers': { flag: '--max-customers', example: '100' },
  };
  assert.equal(
    describeFieldErrors(
      [
        { field: 'allow_cidrs.1', message: '"x" is not an address' },
        { field: 'limits.max_customers', message: 'must be <= 100000' },
        { field: 'other', message: 'is wrong' },
      ],
      hints,
    ),
    '--allow-cidr "x" is not an address, for example --allow-cidr 203.0.113.0/24; --max-customers must be <= 100000, for example --max-customers 100; other is wrong',
  );
  assert.equal(describeFieldErrors([{ field: 'other', message: 'is wrong' }], hints), undefined);
});

test('a secret flag is masked in the title a process shows to ps; a command line without one is left alone', () => {
  assert.equal(
    maskedCommandLine(['listen', '--api-key', 'tnt_test_a_b_c', '--secret=abc', '--forward-to', 'http://x']),
    'tenantry listen --api-key *** --secret=*** --forward-to http://x',
  );
  assert.equal(maskedCommandLine(['serve', '--listen', '127.0.0.1:8080']), undefined);
});
