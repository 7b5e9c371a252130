import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { useCompileCache } from '../../bin/compile-cache.js';

// One process enables the cache once: the refusal is checked first, then the cache that is used.
test('a cache directory someone else can write to is not used', () => {
  const base = mkdtempSync(join(tmpdir(), 'tenantry-cache-'));
  const dir = join(base, 'tenantry', 'node-compile-cache');
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o777);
  assert.equal(useCompileCache({ XDG_CACHE_HOME: base }), undefined);
});

test("the cache is made owner-only in the user's cache directory, and used", () => {
  const base = mkdtempSync(join(tmpdir(), 'tenantry-cache-'));
  const used = useCompileCache({ XDG_CACHE_HOME: base });
  const dir = join(base, 'tenantry', 'node-compile-cache');
  assert.ok(used?.startsWith(dir), `the cache is in ${dir}: ${used}`);
  assert.equal(statSync(dir).mode & 0o777, 0o700);
});
