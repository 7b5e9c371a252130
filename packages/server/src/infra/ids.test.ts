import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newId } from './ids.ts';

test('ids carry their prefix, 26 base-32 characters, and sort in creation order even within one millisecond', () => {
  const ids = [newId('request', 1_000), newId('request', 1_000), newId('request', 1_000), newId('request', 2_000), newId('request', 1_500)];
  for (const id of ids) assert.match(id, /^req_[0-9a-hjkmnp-tv-z]{26}$/);
  assert.deepEqual([...ids].sort(), ids);
  assert.equal(new Set(ids).size, ids.length);
  assert.match(newId('operation'), /^op_/);
  assert.match(newId('delivery'), /^dlv_/);
});
